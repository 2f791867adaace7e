"""The task layer: tasks between nodes, requester and provider side (``node.tasks``).

Modules: ``protocol`` (the messages nodes send each other), ``requester``, ``provider`` and
``responder`` (the two sides), ``receipts``, ``outbox`` (sending exactly once), ``inbound``
(opening and dispatching envelopes), ``events`` (subscriptions), ``layer`` (the whole).
"""

from anet_core.protocol.tasks import EffectStatus, Reason
from anet_core.tasks.common import TaskError
from anet_core.tasks.events import TaskSubscription
from anet_core.tasks.layer import TaskLayer, open_task_layer
from anet_core.tasks.responder import Responder

__all__ = ["EffectStatus", "Reason", "Responder", "TaskError", "TaskLayer", "TaskSubscription",
           "open_task_layer"]
