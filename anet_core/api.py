"""The surface a module of anet is written against: everything here, and nothing else of the core.

A module (``plugins/*`` in this repository, or a third-party distribution with an entry point in
``anet.modules``) imports from this module, from ``anet_core.wire`` (the A2A 1.0 wire models)
and from ``anet_core.protocol`` (what node and hub exchange, docs/protocol.md). A test in
``tests/core/test_architecture.py`` fails when a module in ``plugins/`` imports anything else
of the core. docs/plugins.md explains each name.

Most names load on first use (``_LAZY`` says where each comes from), so that a module's hooks
can import this surface without loading the node: ``anet --help`` imports no daemon code
(docs/performance.md, "Start-up and idle memory").
"""

from __future__ import annotations

import importlib
from typing import Any

from anet_core import hookimpl
from anet_core.errors import AnetError, ReasonError
from anet_core.records import (
    ArtifactLike,
    BackendError,
    BackendKind,
    BackendOpener,
    BackendStage,
    BackendTarget,
    CancelCheck,
    CancelVerdict,
    CardExtension,
    CheckResult,
    CheckStatus,
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DirectorySource,
    DoctorCheck,
    EndingTask,
    GateAction,
    GateVerdict,
    InboundTask,
    KeyRotationStep,
    Lifespan,
    McpCall,
    McpResult,
    McpTool,
    MessageLike,
    PolicyVeto,
    RequesterTurn,
    Responder,
    SkillSource,
    TaskClaim,
    TaskGate,
    TurnAnswer,
    TurnHandler,
)
from anet_core.util.lazy import lazy

_LAZY: dict[str, tuple[str, ...]] = {
    "anet_core.cli.context": ("CliContext",),
    "anet_core.config": ("Config", "read_raw", "write_config"),
    "anet_core.control.client": ("AsyncControlClient", "ControlClient"),
    "anet_core.control.guard": ("LoopbackGuard",),
    "anet_core.control.loopback": ("TokenFile", "bind_loopback"),
    "anet_core.daemon": ("configure_logging", "running_pid"),
    "anet_core.doctor": ("CheckContext",),
    "anet_core.evidence": ("EvidenceHead", "ReadRecord", "read_records", "read_segment"),
    "anet_core.identity": (
        "AID_REGEX", "AidError", "HistoryError", "Identity", "VerifiedHistory", "check_aid",
        "is_aid", "verify_history", "verify_signature",
    ),
    "anet_core.identity.keys": ("verify_ed25519",),
    "anet_core.identity.keystore": ("IdentityError",),
    "anet_core.link": (
        "QUERY_REFUSALS", "HubError", "KeyState", "PeerInfo", "SearchPage", "SearchQuery",
        "Verification", "directory_listing", "search_remote",
    ),
    "anet_core.metrics": ("NodeMetrics",),
    "anet_core.node": ("NODE_KEY", "Listener", "Node", "NodeKey"),
    "anet_core.plugins": ("Plugins",),
    "anet_core.protocol.tasks": ("METADATA_PREFIX", "TaskMetadata"),
    "anet_core.settings": ("EVENT_LOOPS", "DataPaths"),
    "anet_core.store": ("immediate_transaction", "page_newest_first"),
    "anet_core.tasks": (
        "InboundPolicy", "LocalOrigin", "LocalTasks", "Reason", "TaskError", "TaskLayer",
        "TaskNotCancelable", "TaskSubscription",
    ),
    "anet_core.tasks.events": ("TaskEvents",),
    "anet_core.util.backoff": ("Backoff", "Failover", "TokenBucket"),
    "anet_core.util.canonical": (
        "b64u", "canonical_json", "decode_cursor", "encode_cursor", "unb64u",
    ),
    "anet_core.util.durations": ("GoDuration", "format_duration", "parse_duration"),
    "anet_core.event_loop": ("event_loop_name", "run_event_loop"),
    "anet_core.util.fsutil": ("private_dir", "write_atomic", "write_private"),
    "anet_core.util.memory": ("release_startup_memory",),
    "anet_core.util.meters": ("Meters",),
    "anet_core.util.procnet": (
        "PROC", "WILDCARDS", "command_of", "holders", "listening_sockets", "normal_address",
    ),
    "anet_core.util.serverlog": ("SERVER_LOG",),
    "anet_core.util.strictjson": ("UnencodableText", "check_value", "load_json",
                                  "may_hold_surrogate"),
}
"""The names imported on first use, by the module that defines them."""

_ORIGIN = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _ORIGIN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "AID_REGEX",
    "EVENT_LOOPS",
    "METADATA_PREFIX",
    "NODE_KEY",
    "PROC",
    "QUERY_REFUSALS",
    "SERVER_LOG",
    "WILDCARDS",
    "AidError",
    "AnetError",
    "ArtifactLike",
    "AsyncControlClient",
    "BackendError",
    "BackendKind",
    "BackendOpener",
    "BackendStage",
    "BackendTarget",
    "Backoff",
    "CancelCheck",
    "CancelVerdict",
    "CardExtension",
    "CheckContext",
    "CheckResult",
    "CheckStatus",
    "CliCommand",
    "CliContext",
    "Config",
    "ConfigBlock",
    "ControlClient",
    "ControlRoutes",
    "DataPaths",
    "DirectorySource",
    "DoctorCheck",
    "EndingTask",
    "EvidenceHead",
    "Failover",
    "GateAction",
    "GateVerdict",
    "GoDuration",
    "HistoryError",
    "HubError",
    "Identity",
    "IdentityError",
    "InboundPolicy",
    "InboundTask",
    "KeyRotationStep",
    "KeyState",
    "Lifespan",
    "Listener",
    "LocalOrigin",
    "LocalTasks",
    "LoopbackGuard",
    "McpCall",
    "McpResult",
    "McpTool",
    "MessageLike",
    "Meters",
    "Node",
    "NodeKey",
    "NodeMetrics",
    "PeerInfo",
    "Plugins",
    "PolicyVeto",
    "ReadRecord",
    "Reason",
    "ReasonError",
    "RequesterTurn",
    "Responder",
    "SearchPage",
    "SearchQuery",
    "SkillSource",
    "TaskClaim",
    "TaskError",
    "TaskEvents",
    "TaskGate",
    "TaskLayer",
    "TaskMetadata",
    "TaskNotCancelable",
    "TaskSubscription",
    "TokenBucket",
    "TokenFile",
    "TurnAnswer",
    "TurnHandler",
    "UnencodableText",
    "Verification",
    "VerifiedHistory",
    "b64u",
    "bind_loopback",
    "canonical_json",
    "check_aid",
    "check_value",
    "command_of",
    "configure_logging",
    "decode_cursor",
    "directory_listing",
    "encode_cursor",
    "event_loop_name",
    "format_duration",
    "holders",
    "hookimpl",
    "immediate_transaction",
    "is_aid",
    "lazy",
    "listening_sockets",
    "load_json",
    "may_hold_surrogate",
    "normal_address",
    "page_newest_first",
    "parse_duration",
    "private_dir",
    "read_raw",
    "read_records",
    "read_segment",
    "release_startup_memory",
    "run_event_loop",
    "running_pid",
    "search_remote",
    "unb64u",
    "verify_ed25519",
    "verify_history",
    "verify_signature",
    "write_atomic",
    "write_config",
    "write_private",
]
