"""The typed records that hooks return. The core runs them; a hook implementation does no I/O.

Modules, one vocabulary each (the hooks that return them are in :mod:`anet_core.hookspecs`):

- ``host``: what a module adds to the daemon and the CLI;
- ``tasks``: the task layer's (inbound tasks, their responder and gates, turns on tasks sent);
- ``cards``: what the node shows of agents (card skills, proxy cards' extensions, directories);
- ``backends``: backend kinds and the channels they open;
- ``mcp``: the tools ``anet mcp`` serves.
"""

from anet_core.records.backends import (
    BackendChannel,
    BackendError,
    BackendKind,
    BackendOpener,
    BackendStage,
    BackendTarget,
)
from anet_core.records.cards import CardExtension, DirectorySource, SkillSource
from anet_core.records.host import (
    CheckResult,
    CheckStatus,
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DoctorCheck,
    KeyRotationStep,
    Lifespan,
)
from anet_core.records.mcp import McpCall, McpResult, McpTool
from anet_core.records.tasks import (
    ArtifactLike,
    CancelCheck,
    CancelVerdict,
    EndingTask,
    GateAction,
    GateVerdict,
    InboundTask,
    MessageLike,
    PolicyVeto,
    RequesterTurn,
    Responder,
    TaskClaim,
    TaskGate,
    TurnAnswer,
    TurnHandler,
)

__all__ = [
    "ArtifactLike",
    "BackendChannel",
    "BackendError",
    "BackendKind",
    "BackendOpener",
    "BackendStage",
    "BackendTarget",
    "CancelCheck",
    "CancelVerdict",
    "CardExtension",
    "CheckResult",
    "CheckStatus",
    "CliCommand",
    "ConfigBlock",
    "ControlRoutes",
    "DirectorySource",
    "DoctorCheck",
    "EndingTask",
    "GateAction",
    "GateVerdict",
    "InboundTask",
    "KeyRotationStep",
    "Lifespan",
    "McpCall",
    "McpResult",
    "McpTool",
    "MessageLike",
    "PolicyVeto",
    "RequesterTurn",
    "Responder",
    "SkillSource",
    "TaskClaim",
    "TaskGate",
    "TurnAnswer",
    "TurnHandler",
]
