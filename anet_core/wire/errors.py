"""The A2A error catalogue as data, the ``A2AError`` exception, and its two wire renderings.

The catalogue is the error table of the A2A specification, with the error format of each
binding (https://a2a-protocol.org/latest/specification/); docs/a2a.md, "Errors", says which
anet sends when.
JSON-RPC: ``{"code", "message", "data": [ErrorInfo, BadRequest?]}`` at HTTP 200.
REST (HTTP+JSON):
``{"error": {"code": <http>, "status": <gRPC name>, "message", "details": [...]}}``.
Clients map errors by JSON-RPC code or by ``ErrorInfo.reason``, never by message text, so the
message is free to say what was wrong and with which value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from pydantic import ValidationError

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
A2A_ERROR_DOMAIN = "a2a-protocol.org"


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """One row of the specification's error table."""

    sdk_name: str
    """The class name in ``a2a.utils.errors`` (for logs and for readers who know the SDK)."""
    code: int
    """JSON-RPC error code."""
    reason: str
    """``google.rpc.ErrorInfo.reason``; the SDK's REST client maps errors by it."""
    http_status: int
    """REST status per spec ≥ 1.0.1 and SDK ≥ 1.0.3."""
    grpc_status: str
    """The ``status`` of the REST google.rpc.Status body."""
    default_message: str
    """The SDK's default message."""
    spec_1_0_0_http_status: int
    """REST status per spec 1.0.0, which the TCK's 1.0-dev branch still encodes
    (docs/conformance.md)."""
    jsonrpc_data: bool = True
    """False where the SDK's JSON-RPC error carries no ``data`` (parse error, unknown method)."""


class A2AErrorKind(Enum):
    """Every error anet sends on the A2A wire. ``kind.value`` is its :class:`ErrorSpec`."""

    TASK_NOT_FOUND = ErrorSpec(
        "TaskNotFoundError", -32001, "TASK_NOT_FOUND", 404, "NOT_FOUND",
        "Task not found", 404)
    TASK_NOT_CANCELABLE = ErrorSpec(
        "TaskNotCancelableError", -32002, "TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION",
        "Task cannot be canceled", 409)
    PUSH_NOTIFICATION_NOT_SUPPORTED = ErrorSpec(
        "PushNotificationNotSupportedError", -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", 400,
        "FAILED_PRECONDITION", "Push Notification is not supported", 400)
    UNSUPPORTED_OPERATION = ErrorSpec(
        "UnsupportedOperationError", -32004, "UNSUPPORTED_OPERATION", 400, "FAILED_PRECONDITION",
        "This operation is not supported", 400)
    CONTENT_TYPE_NOT_SUPPORTED = ErrorSpec(
        "ContentTypeNotSupportedError", -32005, "CONTENT_TYPE_NOT_SUPPORTED", 400,
        "INVALID_ARGUMENT", "Incompatible content types", 415)
    INVALID_AGENT_RESPONSE = ErrorSpec(
        "InvalidAgentResponseError", -32006, "INVALID_AGENT_RESPONSE", 500, "INTERNAL",
        "Invalid agent response", 502)
    EXTENDED_AGENT_CARD_NOT_CONFIGURED = ErrorSpec(
        "ExtendedAgentCardNotConfiguredError", -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", 400,
        "FAILED_PRECONDITION", "Authenticated Extended Card is not configured", 400)
    EXTENSION_SUPPORT_REQUIRED = ErrorSpec(
        "ExtensionSupportRequiredError", -32008, "EXTENSION_SUPPORT_REQUIRED", 400,
        "FAILED_PRECONDITION", "Extension support required", 400)
    VERSION_NOT_SUPPORTED = ErrorSpec(
        "VersionNotSupportedError", -32009, "VERSION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION",
        "Version not supported", 400)
    # JSON-RPC standard errors. A REST parse error reports reason INVALID_REQUEST, as the SDK does.
    PARSE_ERROR = ErrorSpec(
        "JSONParseError", -32700, "INVALID_REQUEST", 400, "INVALID_ARGUMENT",
        "Invalid JSON payload", 400, jsonrpc_data=False)
    INVALID_REQUEST = ErrorSpec(
        "InvalidRequestError", -32600, "INVALID_REQUEST", 400, "INVALID_ARGUMENT",
        "Invalid Request", 400)
    METHOD_NOT_FOUND = ErrorSpec(
        "MethodNotFoundError", -32601, "METHOD_NOT_FOUND", 404, "NOT_FOUND",
        "Method not found", 404, jsonrpc_data=False)
    INVALID_PARAMS = ErrorSpec(
        "InvalidParamsError", -32602, "INVALID_PARAMS", 400, "INVALID_ARGUMENT",
        "Invalid params", 400)
    INTERNAL_ERROR = ErrorSpec(
        "InternalError", -32603, "INTERNAL_ERROR", 500, "INTERNAL", "Internal error", 500)

    @property
    def spec(self) -> ErrorSpec:
        """The table row of this error."""
        return self.value

    @classmethod
    def from_code(cls, code: int) -> A2AErrorKind | None:
        """The error with this JSON-RPC code, or None for a code outside the catalogue."""
        return next((kind for kind in cls if kind.spec.code == code), None)

    @classmethod
    def from_reason(cls, reason: str) -> A2AErrorKind | None:
        """The error with this ErrorInfo reason (INVALID_REQUEST is InvalidRequest, not the
        parse error that borrows the reason on REST), or None."""
        return next((kind for kind in cls
                     if kind.spec.reason == reason and kind is not cls.PARSE_ERROR), None)


class FieldViolation(NamedTuple):
    """One entry of a ``google.rpc.BadRequest``: the offending field path and what is wrong."""

    field: str
    description: str


class A2AError(Exception):
    """An A2A error to send to the client.

    ``details`` becomes ``ErrorInfo.metadata`` (the SDK client exposes it as ``exc.data``);
    ``field_violations`` adds a ``google.rpc.BadRequest`` detail (validation failures).
    """

    def __init__(self, kind: A2AErrorKind, message: str | None = None, *,
                 details: Mapping[str, Any] | None = None,
                 field_violations: Sequence[FieldViolation] = ()) -> None:
        self.kind = kind
        self.message = message or kind.spec.default_message
        self.details: dict[str, Any] = dict(details or {})
        self.field_violations: tuple[FieldViolation, ...] = tuple(field_violations)
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"A2AError({self.kind.name}, {self.message!r})"

    @property
    def code(self) -> int:
        """The JSON-RPC error code."""
        return self.kind.spec.code

    @property
    def http_status(self) -> int:
        """The HTTP status of the REST binding (spec ≥ 1.0.1 table)."""
        return self.kind.spec.http_status

    def typed_details(self) -> list[dict[str, Any]]:
        """The google.rpc typed details: ErrorInfo first, then BadRequest if fields were named."""
        details: list[dict[str, Any]] = [{
            "@type": ERROR_INFO_TYPE,
            "reason": self.kind.spec.reason,
            "domain": A2A_ERROR_DOMAIN,
            "metadata": dict(self.details),
        }]
        if self.field_violations:
            details.append({
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{"field": v.field, "description": v.description}
                                    for v in self.field_violations],
            })
        return details


def jsonrpc_error_object(error: A2AError) -> dict[str, Any]:
    """The ``error`` member of a JSON-RPC response; ``data`` is always an array."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.kind.spec.jsonrpc_data:
        body["data"] = error.typed_details()
    return body


def rest_error_body(error: A2AError) -> dict[str, Any]:
    """The google.rpc.Status body of a REST error; send it with
    ``error.http_status`` and ``Content-Type: application/json``."""
    return {"error": {
        "code": error.http_status,
        "status": error.kind.spec.grpc_status,
        "message": error.message,
        "details": error.typed_details(),
    }}


def _error_info_metadata(details: object) -> dict[str, Any]:
    if isinstance(details, list):
        for item in details:
            if isinstance(item, dict) and item.get("@type") == ERROR_INFO_TYPE:
                metadata = item.get("metadata")
                return dict(metadata) if isinstance(metadata, dict) else {}
    return {}


def error_from_jsonrpc(error: Mapping[str, Any]) -> A2AError:
    """Read a JSON-RPC ``error`` member from a peer. Unknown codes become INTERNAL_ERROR with
    the original code and message kept in ``details``."""
    code = error.get("code")
    message = error.get("message") if isinstance(error.get("message"), str) else None
    kind = A2AErrorKind.from_code(code) if isinstance(code, int) else None
    details = _error_info_metadata(error.get("data"))
    if kind is None:
        return A2AError(A2AErrorKind.INTERNAL_ERROR, f"JSON-RPC error {code}: {message}",
                        details={"code": code, **details})
    return A2AError(kind, message, details=details)


def error_from_rest(http_status: int, body: object) -> A2AError:
    """Read a REST error from a peer the way the SDK client does: by ErrorInfo reason, else a
    404 is an unknown method and anything else an internal error."""
    status = body.get("error") if isinstance(body, dict) else None
    status = status if isinstance(status, dict) else {}
    message = status.get("message") if isinstance(status.get("message"), str) else None
    details = status.get("details")
    if isinstance(details, list):
        for item in details:
            if isinstance(item, dict) and item.get("@type") == ERROR_INFO_TYPE:
                kind = A2AErrorKind.from_reason(str(item.get("reason", "")))
                if kind is not None:
                    return A2AError(kind, message, details=_error_info_metadata(details))
    if http_status == 404:
        return A2AError(A2AErrorKind.METHOD_NOT_FOUND, message)
    return A2AError(A2AErrorKind.INTERNAL_ERROR, f"HTTP {http_status}: {message or 'error'}",
                    details={"httpStatus": http_status})


# --- validation failures -------------------------------------------------------------------------

_MAX_SHOWN_VALUE = 80


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(params)"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN_VALUE else text[:_MAX_SHOWN_VALUE] + "..."


def invalid_params(exc: ValidationError, prefix: str = "") -> A2AError:
    """An InvalidParams error that names every offending field (camelCase path) and value.

    ``details`` carries ``{"errors": [{"field", "message"}]}`` and a BadRequest lists the same
    violations, which is the official a2a-sdk's shape.
    """
    violations: list[FieldViolation] = []
    sentences: list[str] = []
    for item in exc.errors(include_url=False):
        path = _field_path(tuple(item["loc"]))
        if prefix:
            path = f"{prefix}.{path}" if path != "(params)" else prefix
        text = str(item["msg"]).removeprefix("Value error, ")
        violations.append(FieldViolation(path, text))
        if item["type"] == "missing":
            sentences.append(f"{path}: {text}")
        else:
            sentences.append(f"{path}: {text} (got {_shown(item.get('input'))})")
    return A2AError(
        A2AErrorKind.INVALID_PARAMS,
        "Invalid params: " + "; ".join(sentences),
        details={"errors": [{"field": v.field, "message": v.description} for v in violations]},
        field_violations=violations,
    )
