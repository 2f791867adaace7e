"""The surface a module of anet is written against: everything here, and nothing else of the core.

A module (``plugins/*`` in this repository, or a third-party distribution with an entry point in
``anet.modules``) imports from this module, from ``anet_core.wire`` (the A2A 1.0 wire models)
and from ``anet_core.protocol`` (what node and hub exchange, docs/protocol.md). A test in
``tests/core/test_architecture.py`` fails when a module in ``plugins/`` imports anything else
of the core. docs/plugins.md explains each name.
"""

from __future__ import annotations

from anet_core import hookimpl
from anet_core.cli.context import CliContext
from anet_core.config import Config, read_raw, write_config
from anet_core.control.client import AsyncControlClient
from anet_core.control.guard import LoopbackGuard, TokenFile, bind_loopback
from anet_core.daemon import configure_logging, running_pid
from anet_core.doctor import CheckContext
from anet_core.errors import AnetError, ReasonError
from anet_core.identity import (
    AID_REGEX,
    AidError,
    HistoryError,
    Identity,
    VerifiedHistory,
    check_aid,
    is_aid,
    verify_history,
    verify_signature,
)
from anet_core.identity.keystore import IdentityError
from anet_core.link import (
    QUERY_REFUSALS,
    HubError,
    KeyState,
    PeerInfo,
    SearchPage,
    SearchQuery,
    Verification,
    directory_listing,
    search_remote,
)
from anet_core.metrics import NodeMetrics
from anet_core.node import NODE_KEY, Listener, Node, NodeKey
from anet_core.plugins import Plugins
from anet_core.protocol.tasks import METADATA_PREFIX, TaskMetadata
from anet_core.records import (
    ArtifactLike,
    BackendError,
    BackendKind,
    BackendStage,
    BackendTarget,
    CardExtension,
    CheckResult,
    CheckStatus,
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DirectorySource,
    DoctorCheck,
    InboundTask,
    KeyRotationStep,
    Lifespan,
    McpCall,
    McpResult,
    McpTool,
    MessageLike,
    PolicyVeto,
    Responder,
    SkillSource,
    TaskClaim,
)
from anet_core.settings import DataPaths
from anet_core.store import page_newest_first
from anet_core.tasks import (
    InboundPolicy,
    LocalOrigin,
    LocalTasks,
    Reason,
    TaskError,
    TaskLayer,
    TaskSubscription,
)
from anet_core.tasks.events import TaskEvents
from anet_core.util.backoff import Backoff, TokenBucket
from anet_core.util.canonical import b64u, canonical_json, decode_cursor, encode_cursor, unb64u
from anet_core.util.durations import GoDuration, format_duration, parse_duration
from anet_core.util.fsutil import private_dir, write_atomic, write_private
from anet_core.util.procnet import (
    PROC,
    WILDCARDS,
    command_of,
    holders,
    listening_sockets,
    normal_address,
)
from anet_core.util.serverlog import SERVER_LOG

__all__ = [
    "AID_REGEX",
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
    "BackendStage",
    "BackendTarget",
    "Backoff",
    "CardExtension",
    "CheckContext",
    "CheckResult",
    "CheckStatus",
    "CliCommand",
    "CliContext",
    "Config",
    "ConfigBlock",
    "ControlRoutes",
    "DataPaths",
    "DirectorySource",
    "DoctorCheck",
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
    "Node",
    "NodeKey",
    "NodeMetrics",
    "PeerInfo",
    "Plugins",
    "PolicyVeto",
    "Reason",
    "ReasonError",
    "Responder",
    "SearchPage",
    "SearchQuery",
    "SkillSource",
    "TaskClaim",
    "TaskError",
    "TaskEvents",
    "TaskLayer",
    "TaskMetadata",
    "TaskSubscription",
    "TokenBucket",
    "TokenFile",
    "Verification",
    "VerifiedHistory",
    "b64u",
    "bind_loopback",
    "canonical_json",
    "check_aid",
    "command_of",
    "configure_logging",
    "decode_cursor",
    "directory_listing",
    "encode_cursor",
    "format_duration",
    "holders",
    "hookimpl",
    "is_aid",
    "listening_sockets",
    "normal_address",
    "page_newest_first",
    "parse_duration",
    "private_dir",
    "read_raw",
    "running_pid",
    "search_remote",
    "unb64u",
    "verify_history",
    "verify_signature",
    "write_atomic",
    "write_config",
    "write_private",
]
