"""Receipts: the provider's signed statement of how a task ended and what it returned.

A receipt is a signed document (``anet_core.identity.documents``)::

    {"type": "anet.receipt/v1", "taskId", "contextId", "requester", "provider",
     "state": final TaskState name, "stateSeq": the terminal update's seq,
     "resultHash": base64url SHA-256 of canonical {"status": {state, message?}, "artifacts": [...]},
     "issuedAt": unix ms, "signer", "keySeq", "signature"}

The hash covers the status without its timestamp and the final artifacts exactly as the terminal
update carries them, so the requester recomputes it from what it received.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from anet_core.identity import (
    DocumentError,
    Identity,
    VerifiedHistory,
    sign_document,
    verify_document,
)
from anet_core.protocol.documents import RECEIPT_TYPE
from anet_core.util.canonical import b64u, canonical_json


def result_hash(status: dict[str, Any], artifacts: list[dict[str, Any]]) -> str:
    """The hash a receipt signs: the final state, the status message and the artifacts."""
    result_status = {key: status[key] for key in ("state", "message") if key in status}
    return b64u(hashlib.sha256(canonical_json({"status": result_status,
                                               "artifacts": artifacts})).digest())


def issue_receipt(identity: Identity, *, task_id: str, context_id: str, requester: str,
                  status: dict[str, Any], artifacts: list[dict[str, Any]],
                  state_seq: int) -> dict[str, Any]:
    return sign_document(identity, {
        "type": RECEIPT_TYPE, "taskId": task_id, "contextId": context_id,
        "requester": requester, "provider": identity.aid, "state": status["state"],
        "stateSeq": state_seq, "resultHash": result_hash(status, artifacts),
        "issuedAt": int(time.time() * 1000)})


def check_receipt(receipt: object, provider_history: VerifiedHistory, *, task_id: str,
                  requester: str, status: dict[str, Any], artifacts: list[dict[str, Any]]) -> str:
    """"" when ``receipt`` proves this result of this task; otherwise why it does not."""
    try:
        content = verify_document(receipt, provider_history)
    except DocumentError as error:
        return f"{error.reason}: {error}"
    expected = {"type": RECEIPT_TYPE, "taskId": task_id, "requester": requester,
                "provider": provider_history.aid, "state": status.get("state"),
                "resultHash": result_hash(status, artifacts)}
    wrong = [name for name, value in expected.items() if content.get(name) != value]
    return f"the receipt's {', '.join(wrong)} do not match the task" if wrong else ""
