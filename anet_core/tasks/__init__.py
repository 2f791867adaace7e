"""The task layer: tasks between nodes, requester and provider side (``node.tasks``).

Modules: ``requester``, ``provider`` and ``responder`` (the two sides), ``policy`` (who may
send tasks), ``hooks`` (what the layer asks the modules), ``receipts``, ``outbox`` (sending
exactly once), ``inbound`` (opening and dispatching envelopes), ``events`` (subscriptions),
``layer`` (the whole). The messages nodes send each other are in ``anet_core.protocol.tasks``.
"""

from anet_core.protocol.tasks import EffectStatus, Reason, TaskMetadata
from anet_core.records import Responder
from anet_core.tasks.common import TaskError, TaskNotCancelable
from anet_core.tasks.events import TaskSubscription
from anet_core.tasks.hooks import TaskHooks
from anet_core.tasks.layer import TaskLayer
from anet_core.tasks.local import LocalTasks
from anet_core.tasks.origin import LocalOrigin
from anet_core.tasks.policy import InboundPolicy

__all__ = ["EffectStatus", "InboundPolicy", "LocalOrigin", "LocalTasks", "Reason", "Responder",
           "TaskError", "TaskHooks", "TaskLayer", "TaskMetadata", "TaskNotCancelable",
           "TaskSubscription"]
