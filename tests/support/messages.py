"""A2A user messages as the tests send them: wire JSON for the node, SDK objects for clients."""

from __future__ import annotations

import secrets
from typing import Any

from a2a.types import Message, Part, Role


def user_message(text: str, message_id: str = "m-1", **fields: Any) -> dict[str, Any]:
    """An A2A Message (wire JSON, role user) with one text part; ``fields`` are further Message
    fields such as ``contextId``, ``taskId`` or ``metadata``."""
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **fields}


def sdk_user_message(text: str, message_id: str = "", **fields: object) -> Message:
    """The same as the official a2a-sdk's ``Message``; ``fields`` are its fields such as
    ``task_id`` or ``metadata``, and the id is a fresh one unless given."""
    return Message(role=Role.ROLE_USER, message_id=message_id or secrets.token_hex(8),
                   parts=[Part(text=text)], **fields)  # type: ignore[arg-type]
