"""``anet balance`` and the doctor's ``x402-credit`` through a real node daemon joined to a real
hub process, credited with ``anet hub credit``."""

from __future__ import annotations

import json

import pytest

from tests.support.payments import assert_ledger_conserved
from tests.support.processes import NodeDir, hub_and_nodes

pytestmark = pytest.mark.timeout(120)


def _credit_check(node: NodeDir) -> dict[str, str]:
    report = node.run("doctor", "--json", check=False)
    checks = json.loads(report.stdout)["checks"]
    found, = (check for check in checks if check["name"] == "x402-credit")
    return found


def test_anet_balance_shows_the_credit_the_operator_gave(tmp_path) -> None:
    with hub_and_nodes(tmp_path, "alice") as (hub, (alice,)):
        aid = alice.aid
        before = alice.json("balance")
        assert before["aid"] == aid and before["balances"] == {}
        assert f"http://127.0.0.1:{hub.port}" == before["railUrl"]
        assert "anet hub credit" in alice.run("balance").stdout

        alice.configure(x402={"auto_max": {"USD": "0.10"}})
        check = _credit_check(alice)
        assert check["status"] == "warn" and "USD" in check["summary"], check

        credited = alice.run("hub", "credit", aid, "2.50", "--data", str(hub.data))
        assert "2.50 USD" in credited.stdout and aid in credited.stdout
        assert alice.json("balance")["balances"] == {"USD": "2.50"}
        assert "2.50 USD" in alice.run("balance").stdout
        check = _credit_check(alice)
        assert check["status"] == "ok" and "2.50 USD" in check["summary"], check

        hub.stop()
        down = alice.run("balance", check=False)
        assert down.returncode != 0
        assert f"http://127.0.0.1:{hub.port}" in down.stderr, down.stderr
        assert_ledger_conserved(hub.data)
