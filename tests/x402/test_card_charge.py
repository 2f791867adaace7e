"""The doctor's ``card-charge``: prices for some skills and a backend for every task, with no
price for every task, serve for free a task that names no skill (docs/payments.md, "Charging
for skills"). A real daemon (``anet up``) with modules x402 and backends; its backend need not
run, the configuration is what is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.nodes import prepare
from tests.support.processes import anet_async

pytest.importorskip("anet_backends")
pytestmark = pytest.mark.timeout(120)

SKILLS = [{"id": "summarize", "name": "Summarize"}, {"id": "review", "name": "Review"}]


async def card_charge(root: Path, prices: dict[str, object]) -> dict[str, object]:
    """``anet doctor card-charge --json``'s check, the daemon started with ``prices``."""
    prepare(root, node={"name": "bob", "skills": SKILLS}, modules={
        "x402": {"prices": prices},
        "backends": {"backends": [{"match": "*", "url": f"unix://{root}/backend.sock"}]}})
    await anet_async(root, "up", disabled="a2a,mcp")
    try:
        status = json.loads((await anet_async(root, "status", "--json")).stdout)
        assert status["card"] == {"catchAll": ["backends"],
                                  "prices": {skill: "x402" for skill in prices}}
        doctor = await anet_async(root, "doctor", "card-charge", "--json", check=False)
        (check,) = json.loads(doctor.stdout)["checks"]
        return dict(check)
    finally:
        await anet_async(root, "stop")


async def test_a_catch_all_backend_without_a_price_for_every_task_is_flagged(
        tmp_path: Path) -> None:
    check = await card_charge(tmp_path / "bob", {"summarize": {"amount": "0.05"}})
    assert check["status"] == "warn", check
    assert check["summary"] == ('a task that names no skill is served for free, by the backend '
                                'for "*" (module backends)')
    assert 'module x402 prices summarize and not "*"' in check["detail"]
    assert 'give "*" a price too' in check["hint"]


async def test_a_price_for_every_task_charges_what_the_catch_all_serves(tmp_path: Path) -> None:
    check = await card_charge(tmp_path / "bob", {"summarize": {"amount": "0.05"},
                                                 "*": {"amount": "0.01"}})
    assert check["status"] == "ok", check
    assert check["summary"] == 'every task is priced ("*" too)'
