"""JSON-RPC 2.0 for the A2A binding: request parsing, params validation, response building.

Two steps, so a handler can answer envelope errors before it looks at the method:

    call = parse_request(body)
    if isinstance(call, JsonRpcRejection):
        return call.response()               # HTTP 200, always
    try:
        params = parse_params(call.method, call.params)
    except A2AError as error:
        return jsonrpc_error_response(call.id, error)

The checks and their codes follow the SDK 1.3 server (observed, not guessed): unparsable JSON
-32700 with ``id: null`` (NaN and Infinity too); a batch, a non-object, a wrong ``jsonrpc``, a
bad ``id`` type, a missing method or non-structured params -32600; an unknown method -32601; bad
params -32602 (a lone surrogate in them too: no answer could carry it back).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from anet_core.util.strictjson import UnencodableText, check_value, load_json, may_hold_surrogate
from anet_core.wire._base import WireModel
from anet_core.wire.errors import A2AError, A2AErrorKind, invalid_params, jsonrpc_error_object
from anet_core.wire.methods import METHODS, A2AMethod

JSONRPC_VERSION = "2.0"

JsonRpcId = str | int | None
"""A request id as echoed back: a string, an integer, or null when it was absent or unusable."""

ModelT = TypeVar("ModelT", bound=WireModel)


@dataclass(frozen=True, slots=True)
class JsonRpcCall:
    """A well-formed call of a known A2A method; ``params`` is still unvalidated JSON."""

    id: JsonRpcId
    method: A2AMethod
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JsonRpcRejection:
    """A request refused before dispatch, with the id to answer under."""

    id: JsonRpcId
    error: A2AError

    def response(self) -> dict[str, Any]:
        """The JSON-RPC error response to send (HTTP 200)."""
        return jsonrpc_error_response(self.id, self.error)


def _invalid_request(request_id: JsonRpcId, message: str) -> JsonRpcRejection:
    return JsonRpcRejection(request_id, A2AError(A2AErrorKind.INVALID_REQUEST, message))


def parse_request(body: bytes | str) -> JsonRpcCall | JsonRpcRejection:
    """Read one JSON-RPC request. Never raises: every failure is a :class:`JsonRpcRejection`.

    A missing ``id`` is answered with ``id: null`` (A2A has no notifications; the SDK does the
    same). ``params`` may be absent or null (read as ``{}``).
    """
    try:
        document = load_json(body)
    except ValueError as exc:
        return JsonRpcRejection(None, A2AError(A2AErrorKind.PARSE_ERROR,
                                               f"Invalid JSON payload: {exc}"))
    if isinstance(document, list):
        return _invalid_request(None, "Batch requests are not supported")
    if not isinstance(document, dict):
        return _invalid_request(
            None, f"A JSON-RPC request must be a JSON object, got {type(document).__name__}")

    raw_id = document.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int | None):
        return _invalid_request(
            None, f"Invalid request: id must be a string, integer, or null, got {raw_id!r}")
    surrogates = may_hold_surrogate(body)
    try:
        if surrogates:
            check_value(raw_id)
    except UnencodableText as exc:
        return _invalid_request(None, f"Invalid request: {exc}")
    request_id: JsonRpcId = raw_id
    try:
        if surrogates:
            check_value(document)
    except UnencodableText as exc:
        if exc.where.startswith("params"):
            return JsonRpcRejection(request_id, A2AError(A2AErrorKind.INVALID_PARAMS,
                                                         f"Invalid params: {exc}"))
        return _invalid_request(request_id, f"Invalid request: {exc}")

    if document.get("jsonrpc") != JSONRPC_VERSION:
        return _invalid_request(
            request_id,
            f"Invalid request: 'jsonrpc' must be exactly '2.0', got {document.get('jsonrpc')!r}")
    method_name = document.get("method")
    if not isinstance(method_name, str) or not method_name:
        return _invalid_request(
            request_id,
            f"Invalid request: 'method' must be a non-empty string, got {method_name!r}")
    params = document.get("params")
    if params is not None and not isinstance(params, dict | list):
        return _invalid_request(
            request_id, f"Invalid request: 'params' must be an object, got {params!r}")

    try:
        method = A2AMethod(method_name)
    except ValueError:
        return JsonRpcRejection(request_id, A2AError(
            A2AErrorKind.METHOD_NOT_FOUND,
            f"Method not found: {method_name!r} (A2A 1.0 names are PascalCase, e.g. SendMessage)"))

    if isinstance(params, list):
        # Structurally valid JSON-RPC, but every A2A method takes named params.
        return JsonRpcRejection(request_id, A2AError(
            A2AErrorKind.INVALID_PARAMS,
            f"Invalid params: {method} takes named params (a JSON object), got an array"))
    return JsonRpcCall(request_id, method, params or {})


def validate_params(model: type[ModelT], params: Mapping[str, Any] | None) -> ModelT:
    """Validate request params (JSON-RPC ``params`` or a REST body) against a model.

    Raises :class:`A2AError` INVALID_PARAMS naming each offending field and value.
    """
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise A2AError(A2AErrorKind.INVALID_PARAMS,
                       f"Invalid params: expected a JSON object, got {type(params).__name__}")
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise invalid_params(exc) from None


def parse_params(method: A2AMethod | str, params: Mapping[str, Any] | None) -> WireModel:
    """The typed params of a method, e.g. a :class:`SendMessageRequest` for SendMessage.

    Raises :class:`A2AError` METHOD_NOT_FOUND for a name outside the table, INVALID_PARAMS for
    bad params.
    """
    try:
        spec = METHODS[A2AMethod(method)]
    except ValueError:
        raise A2AError(A2AErrorKind.METHOD_NOT_FOUND, f"Method not found: {method!r}") from None
    return validate_params(spec.params_model, params)


def jsonrpc_result_response(request_id: JsonRpcId,
                            result: WireModel | Mapping[str, Any] | None) -> dict[str, Any]:
    """A success response; a model is written as ProtoJSON, ``None`` as ``"result": null``.

    Also the body of each SSE event of a streaming call (with a :class:`StreamResponse`).
    """
    body = result.wire() if isinstance(result, WireModel) else (
        dict(result) if result is not None else None)
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "result": body}


def jsonrpc_error_response(request_id: JsonRpcId, error: A2AError) -> dict[str, Any]:
    """An error response (send it with HTTP 200)."""
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": jsonrpc_error_object(error)}
