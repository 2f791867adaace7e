"""What the control routes read from a request: a typed JSON body, numeric query parameters.

Bad input is refused as :class:`AnetError` naming the value; the control plane's middleware
answers it as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from anet_core.errors import AnetError
from anet_core.util.strictjson import parse_json


class RequestBody(BaseModel):
    """A route's JSON body: unknown keys are refused, keys may be given by their camelCase
    alias."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


Body = TypeVar("Body", bound=RequestBody)


async def read_body(request: web.Request, model: type[Body]) -> Body:
    """The body as ``model``; strict JSON only (no NaN, no lone surrogates: parse_json)."""
    try:
        return model.model_validate(parse_json(await request.read()))
    except (ValueError, ValidationError) as error:
        raise AnetError("bad-request",
                        f"{request.path}: the request body is invalid: {error}") from None


def query_number(query: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(query.get(name, default))
    except ValueError:
        raise AnetError("invalid-params", f"{name} {query[name]!r} is not a number") from None
