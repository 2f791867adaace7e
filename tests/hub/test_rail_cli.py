"""``anet hub credit`` and ``anet hub ledger`` as real processes on a hub's data directory, with
the hub running and stopped."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from anet_core.errors import AnetError
from anet_core.identity import Identity
from anet_hub import admin
from tests.support.hubs import HubClients, RunningHub
from tests.support.payments import assert_ledger_conserved_async
from tests.support.processes import ANET, REPO, anet_async

pytestmark = pytest.mark.timeout(120)


def hub_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ANET, "hub", *args], capture_output=True, text=True, timeout=60,
                          check=False, cwd=REPO, env={**os.environ})


async def test_credit_and_ledger_while_the_hub_runs_and_after(hub: RunningHub, nodes: HubClients,
                                                              tmp_path: Path) -> None:
    await nodes.connect("alice", hub)
    alice = nodes.identity("alice").aid
    data = str(hub.config.data_dir)
    node_dir = tmp_path / "cli-node"
    empty = await anet_async(node_dir, "hub", "ledger", "--data", data)
    assert "empty" in empty.stdout
    first = await anet_async(node_dir, "hub", "credit", alice, "1.25", "--data", data)
    assert f"Credited 1.25 USD to {alice}" in first.stdout and "balance 1.25 USD" in first.stdout
    assert await hub.state.storage.ledger.balance(alice, "USD") == 125  # the running hub sees it
    await hub.stop()
    second = await anet_async(node_dir, "hub", "credit", alice, "0.000001", "--asset", "USDC",
                              "--data", data)
    assert "0.000001 USDC" in second.stdout
    listing = json.loads((await anet_async(node_dir, "hub", "ledger", "--data", data,
                                           "--json")).stdout)
    assert [(entry["kind"], entry["payee"], entry["amount"], entry["asset"])
            for entry in listing["entries"]] == [("credit", alice, "1.25", "USD"),
                                                 ("credit", alice, "0.000001", "USDC")]
    assert listing["balances"] == [{"aid": alice, "asset": "USD", "amount": "1.25"},
                                   {"aid": alice, "asset": "USDC", "amount": "0.000001"}]
    text = (await anet_async(node_dir, "hub", "ledger", "--data", data)).stdout
    assert "operator -> " + alice in text and "1.25 USD" in text
    await assert_ledger_conserved_async(hub.config.data_dir)


async def test_bad_credit_names_the_value_and_credits_nothing(hub: RunningHub, nodes: HubClients,
                                                              tmp_path: Path) -> None:
    await nodes.connect("alice", hub)
    alice = nodes.identity("alice").aid
    stranger = Identity.create(tmp_path / "stranger").aid
    data = hub.config.data_dir
    for args, named in [((alice, "-1"), "'-1'"), (("not-an-aid", "1"), "'not-an-aid'"),
                        ((stranger, "1"), stranger)]:
        refused = await anet_async(tmp_path / "cli-node", "hub", "credit", *args, "--data",
                                   str(data), check=False)
        assert refused.returncode != 0, (args, refused.stdout)
        assert named in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    for amount, asset, reason in [
            ("0", "USD", "hub-credit-not-a-price"), ("abc", "USD", "hub-credit-not-a-price"),
            ("1e3", "USD", "hub-credit-not-a-price"),
            ("0.001", "USD", "hub-credit-too-many-decimals"),
            ("1", "DOGE", "hub-credit-unknown-asset"),
            ("10000000000000.01", "USD", "hub-credit-too-large")]:
        with pytest.raises(AnetError) as bad:
            await asyncio.to_thread(admin.credit, data, alice, amount, asset)
        assert bad.value.reason == reason, (amount, bad.value)
        assert repr(amount) in bad.value.message or asset in bad.value.message, bad.value.message
        assert "skill" not in bad.value.message, bad.value.message  # a credit is no price
    totals = await assert_ledger_conserved_async(data)
    assert totals.entries == []


def test_an_operator_command_on_a_directory_without_a_hub_says_so(tmp_path: Path) -> None:
    refused = hub_cli("credit", "a" * 32, "1", "--data", str(tmp_path / "nothing"))
    assert refused.returncode != 0 and "holds no hub" in refused.stderr, refused.stderr
