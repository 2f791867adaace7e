"""The shared base of every wire model and the scalar types ProtoJSON needs.

ProtoJSON (the protobuf JSON mapping of ``lf.a2a.v1``) decides which fields appear on output by
*presence*, not by value alone:

* a field with explicit presence (a message, a ``google.protobuf.Struct``, a oneof member, a
  proto3 ``optional`` scalar) is written whenever it is set, even to ``{}``, ``0`` or ``false``;
* a plain proto3 scalar, repeated or map field is written only when it differs from its default
  (``""``, ``0``, ``false``, the ``*_UNSPECIFIED`` enum value, ``[]``, ``{}``).

The models encode that in their field declarations, so nobody has to keep a list in sync:
a field whose Python default is ``None`` has explicit presence (``None`` means "not set");
every other field has implicit presence and is dropped while it holds its default value.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum
from functools import cache
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, JsonValue, PlainSerializer, PlainValidator
from pydantic.alias_generators import to_camel

from anet_core.util.canonical import compact_json
from anet_core.wire.enums import ProtoEnum

JsonObject = dict[str, JsonValue]
"""A ``google.protobuf.Struct`` kept as plain JSON: integers stay integers (protobuf would
turn every number into a double)."""

# --- google.protobuf.Timestamp -------------------------------------------------------------------

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:[Zz]|([+-])(\d{2}):(\d{2}))$"
)


def parse_timestamp(value: object) -> datetime:
    """An aware UTC ``datetime`` from RFC 3339 text (``Z`` or an offset) or an aware datetime.

    Digits beyond microseconds are dropped: Python's datetime cannot hold nanoseconds, and the
    Python SDK stamps its tasks with microsecond precision anyway.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("a timestamp needs a time zone; naive datetimes are ambiguous")
        return value.astimezone(UTC)
    if not isinstance(value, str):
        # ValueError, not TypeError: pydantic turns only ValueError into a ValidationError.
        raise ValueError(
            f"expected an RFC 3339 timestamp string, got {type(value).__name__}")
    match = _RFC3339.match(value)
    if match is None:
        raise ValueError(
            f"{value!r} is not an RFC 3339 timestamp (expected e.g. '2026-01-31T12:00:00Z')"
        )
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = match.groups()
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    zone = UTC
    if sign is not None:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        zone = timezone(-offset if sign == "-" else offset)
    try:
        stamp = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                         micro, tzinfo=zone)
        return stamp.astimezone(UTC)
    except (ValueError, OverflowError) as exc:  # OverflowError: an offset past year 1 or 9999
        raise ValueError(f"{value!r} is not a valid timestamp: {exc}") from None


def format_timestamp(value: datetime) -> str:
    """ProtoJSON text of a timestamp: UTC, ``Z`` suffix, 0, 3 or 6 fractional digits.

    The digit count follows protobuf's own writer (whole milliseconds get three digits), so a
    timestamp read from the SDK is written back byte for byte.
    """
    utc = parse_timestamp(value)
    text = (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
            f"T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}")
    if utc.microsecond == 0:
        return text + "Z"
    if utc.microsecond % 1000 == 0:
        return f"{text}.{utc.microsecond // 1000:03d}Z"
    return f"{text}.{utc.microsecond:06d}Z"


Timestamp = Annotated[
    datetime,
    PlainValidator(parse_timestamp),
    PlainSerializer(format_timestamp, return_type=str, when_used="json"),
]
"""``google.protobuf.Timestamp``: an aware UTC datetime in Python, RFC 3339 text on the wire."""

# --- bytes ---------------------------------------------------------------------------------------


def parse_base64(value: object) -> bytes:
    """Bytes from base64 text (standard or URL-safe, padding optional, as protobuf accepts)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if not isinstance(value, str):
        raise ValueError(f"expected base64 text, got {type(value).__name__}")
    text = value.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise ValueError(f"{shown!r} is not valid base64") from None


def format_base64(value: bytes) -> str:
    """Standard base64 with padding, as ProtoJSON writes ``bytes``."""
    return base64.b64encode(value).decode("ascii")


Base64Bytes = Annotated[
    bytes,
    PlainValidator(parse_base64),
    PlainSerializer(format_base64, return_type=str, when_used="json"),
]
"""Proto ``bytes``: raw bytes in Python, standard padded base64 on the wire."""

# --- the base model ------------------------------------------------------------------------------


def _wire_value(value: Any) -> Any:
    """The ProtoJSON form of one field value (recursing into lists, maps and models)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float:
        return value  # most values: nothing to convert (an enum is a str subclass, not a str)
    if isinstance(value, WireModel):
        return value.wire()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, bytes):
        return format_base64(value)
    if isinstance(value, list | tuple):
        return [_wire_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _wire_value(item) for key, item in value.items()}
    return value


def _is_proto_default(value: Any) -> bool:
    if isinstance(value, WireModel):
        return False  # a set message field is always written
    if isinstance(value, ProtoEnum):
        return value._name_ == type(value)._member_names_[0]  # number 0, without the search
    return not value  # "", 0, False, [], {}, b""


_ALWAYS, _EXPLICIT, _IMPLICIT = range(3)
"""How :meth:`WireModel.wire` treats a field: written even at its default (``ALWAYS_EMITTED``),
written whenever set (explicit presence), written when it differs from its default."""


@cache
def _output_plan(model: type[WireModel]) -> tuple[tuple[str, str, int], ...]:
    """(field name, wire name, treatment) of every field of ``model``, in declaration order;
    made at the model's first :meth:`WireModel.wire`."""
    plan = []
    for name, field in model.model_fields.items():
        if name in model.ALWAYS_EMITTED:
            treatment = _ALWAYS
        elif field.default is None and field.default_factory is None:
            treatment = _EXPLICIT
        else:
            treatment = _IMPLICIT
        plan.append((name, field.alias or name, treatment))
    return tuple(plan)


class WireModel(BaseModel):
    """Base of every A2A 1.0 wire type.

    Input: camelCase or snake_case keys, unknown keys ignored (forward compatibility, and the
    TCK mixes spellings). Output: :meth:`wire` gives exactly what the SDK's ``MessageToDict``
    gives for the same proto message.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
    )

    ALWAYS_EMITTED: ClassVar[frozenset[str]] = frozenset()
    """Field names written even at their default value (ListTasksResponse must show all four)."""

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Self:
        """Validate a ProtoJSON object; raises ``pydantic.ValidationError`` naming the field."""
        return cls.model_validate(data)

    @classmethod
    def from_wire_json(cls, text: str | bytes) -> Self:
        """Validate ProtoJSON text; raises ``pydantic.ValidationError``."""
        return cls.model_validate(json.loads(text))

    def wire(self) -> dict[str, Any]:
        """The ProtoJSON object: camelCase keys, enum names, unset and default fields left out."""
        values = self.__dict__
        out: dict[str, Any] = {}
        for name, wire_name, treatment in _output_plan(type(self)):
            value = values[name]
            if treatment != _ALWAYS and (value is None or (
                    treatment == _IMPLICIT and _is_proto_default(value))):
                continue
            out[wire_name] = _wire_value(value)
        return out

    def wire_json(self) -> str:
        """:meth:`wire` as :func:`compact_json` text."""
        return compact_json(self.wire())


def exactly_one(model: WireModel, members: tuple[str, ...], oneof: str) -> str:
    """Check a oneof: return the name of the one member that is set, or raise ``ValueError``."""
    fields = type(model).model_fields
    present = [name for name in members if getattr(model, name) is not None]
    wire_names = [fields[name].alias or name for name in members]
    if not present:
        raise ValueError(f"one of {', '.join(wire_names)} is required ({oneof})")
    if len(present) > 1:
        both = " and ".join(fields[name].alias or name for name in present)
        raise ValueError(f"only one of {', '.join(wire_names)} may be set ({oneof}); got {both}")
    return present[0]
