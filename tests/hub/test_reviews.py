"""Reviews: only with a completed-task receipt from the subject, once per receipt, counted."""

from __future__ import annotations

import pytest

from anet_core.identity import Identity
from anet_core.link import HubError
from anet_core.tasks.receipts import issue_receipt


def receipt(provider: Identity, requester: str, task_id: str = "task-1",
            state: str = "TASK_STATE_COMPLETED") -> dict:
    """A receipt exactly as the task layer issues it."""
    return issue_receipt(provider, task_id=task_id, context_id="ctx-1", requester=requester,
                         status={"state": state}, artifacts=[{"artifactId": "a", "parts": []}],
                         state_seq=3)


async def _refused(client, review: dict) -> str:
    with pytest.raises(HubError) as caught:
        await client.post_review(review)
    return caught.value.reason


async def test_reviews_need_a_valid_receipt_and_count_once(hub, nodes):
    await nodes.connect("bob", hub)
    alice = await nodes.connect("alice", hub)
    carol = await nodes.connect("carol", hub)
    bob, alice_id, carol_id = (nodes.identity(name) for name in ("bob", "alice", "carol"))

    def review(rating: int, proof: dict) -> dict:
        return {"subject": bob.aid, "rating": rating, "text": "good", "receipt": proof}

    by_carol = receipt(carol_id, alice_id.aid) | {"provider": bob.aid}
    assert await _refused(alice, review(5, by_carol)) == "receipt-wrong-signer"
    altered = receipt(bob, carol_id.aid) | {"requester": alice_id.aid}
    assert await _refused(alice, review(5, altered)) == "receipt-bad-signature"
    assert await _refused(alice, review(5, receipt(bob, carol_id.aid))) == "receipt-wrong-parties"
    failed = receipt(bob, alice_id.aid, state="TASK_STATE_FAILED")
    assert await _refused(alice, review(1, failed)) == "receipt-not-completed"
    assert await _refused(alice, review(9, receipt(bob, alice_id.aid))) == "review-invalid"
    assert await _refused(alice, {"subject": bob.aid, "rating": 5}) == "review-invalid"

    await alice.post_review(review(5, receipt(bob, alice_id.aid)))
    again = receipt(bob, alice_id.aid)  # a second receipt for the same task
    assert await _refused(alice, review(1, again)) == "review-duplicate"
    await carol.post_review(review(2, receipt(bob, carol_id.aid, task_id="task-2")))

    peer = await alice.peer(bob.aid)
    assert peer.review_count == 2 and peer.avg_rating == 3.5


async def test_a_review_of_an_unknown_agent_is_refused(hub, nodes):
    alice = await nodes.connect("alice", hub)
    stranger = nodes.identity("stranger")  # never registered
    proof = receipt(stranger, nodes.identity("alice").aid)
    reason = await _refused(alice, {"subject": stranger.aid, "rating": 4, "receipt": proof})
    assert reason == "unknown-agent"
