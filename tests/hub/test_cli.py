"""``anet hub serve`` as a real process, the operator commands, ``anet join``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess

import aiohttp
import pytest

from anet_core.identity import Identity
from anet_core.link import JoinState
from anet_core.link.client import HubClient
from tests.support.processes import ANET, REPO, HubProcess, free_port, without_uvloop
from tests.support.waiting import eventually

COMMAND_TIMEOUT_S = 60


def anet(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ANET, *args], env=env, check=False, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {**os.environ, "ANET_DATA_DIR": str(tmp_path / "node")}


async def _wait_healthy(url: str, process: asyncio.subprocess.Process) -> None:
    async with aiohttp.ClientSession() as session, asyncio.timeout(30):
        while True:
            assert process.returncode is None, "anet hub serve exited early"
            try:
                async with session.get(url + "/v1/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)


async def test_hub_serve_process_with_approval_and_official_list(tmp_path, env):
    data, port = tmp_path / "hub", free_port()
    process = await asyncio.create_subprocess_exec(
        *ANET, "hub", "serve", "--listen", f"127.0.0.1:{port}", "--data", str(data),
        "--approval",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    client = None
    try:
        await _wait_healthy(f"http://127.0.0.1:{port}", process)
        identity = Identity.create(tmp_path / "alice" / "identity")
        client = HubClient(identity, url=f"ws://127.0.0.1:{port}",
                           pin_path=tmp_path / "alice" / "pin.json")
        await client.start()
        await eventually(lambda: client.status.state is JoinState.PENDING)

        listed = await asyncio.to_thread(anet, "hub", "pending", "--data", str(data), "--json",
                                         env=env)
        assert [row["aid"] for row in json.loads(listed.stdout)] == [identity.aid]
        approved = await asyncio.to_thread(anet, "hub", "approve", identity.aid, "--data",
                                           str(data), env=env)
        assert approved.returncode == 0, approved.stderr
        await eventually(lambda: client.status.state is JoinState.REGISTERED)
        official = await asyncio.to_thread(anet, "hub", "official", "add", identity.aid,
                                           "--data", str(data), env=env)
        assert official.stdout.split() == [identity.aid]
        assert (await client.peer(identity.aid)).official is True
        bad = await asyncio.to_thread(anet, "hub", "approve", "nope", "--data", str(data),
                                      env=env)
        assert bad.returncode == 1 and "'nope' is not an AID" in bad.stderr
    finally:
        if client is not None:
            await client.close()
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            _, stderr = await process.communicate()
    assert process.returncode == 0
    log = stderr.decode()
    assert "event=listening" in log and "event=registered" in log and "event=stopped" in log


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_hub_serve_runs_on_the_loop_chosen(tmp_path, loop):
    hub = HubProcess(tmp_path / "hub" / "data", free_port(), options=("--loop", loop))
    await asyncio.to_thread(hub.start)
    process = hub.process
    names = ("alice", "bob")
    identities = [Identity.create(tmp_path / name / "identity") for name in names]
    clients = [HubClient(identity, url=hub.url, pin_path=tmp_path / name / "pin.json")
               for name, identity in zip(names, identities, strict=True)]
    try:
        for client in clients:
            await client.start()
        await eventually(lambda: all(client.status.state is JoinState.REGISTERED
                                     for client in clients))
        assert (await clients[0].peer(identities[1].aid)).history is not None
    finally:
        for client in clients:
            await client.close()
        await asyncio.to_thread(hub.stop)
    assert process is not None and process.returncode == 0
    assert f"loop={loop}" in (tmp_path / "hub" / "hub.log").read_text()


def test_hub_serve_refuses_loop_uvloop_without_uvloop(tmp_path):
    refused = subprocess.run(
        [*ANET, "hub", "serve", "--listen", f"127.0.0.1:{free_port()}", "--data",
         str(tmp_path / "hub"), "--loop", "uvloop"],
        env=without_uvloop(tmp_path), capture_output=True, text=True, timeout=60, cwd=REPO)
    assert refused.returncode != 0
    assert "--loop uvloop: uvloop is not installed" in refused.stderr
    assert "anet-hub[fast]" in refused.stderr


def test_hub_serve_refuses_a_bad_listen_address(tmp_path, env):
    result = anet("hub", "serve", "--listen", "nonsense", "--data", str(tmp_path / "h"), env=env)
    assert result.returncode == 1 and "expected HOST:PORT" in result.stderr


def test_join_records_the_hub_url(tmp_path, env):
    result = anet("join", "http://127.0.0.1:8765/", env=env)
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "node" / "config.json").read_text())
    assert config["hub"]["url"] == "ws://127.0.0.1:8765"
    assert "anet up" in result.stdout
    bad = anet("join", "ftp://example.org", env=env)
    assert bad.returncode == 1 and "is not a hub URL" in bad.stderr
    several = anet("join", "ws://a.example:8765", "https://b.example", "ws://a.example:8765",
                   env=env)
    assert several.returncode == 0, several.stderr
    hub = json.loads((tmp_path / "node" / "config.json").read_text())["hub"]
    assert (hub["url"], hub["instances"]) == ("ws://a.example:8765", ["wss://b.example"])
    assert "and its other instances wss://b.example" in several.stdout
    assert anet("join", "ws://c.example", env=env).returncode == 0
    assert "instances" not in json.loads((tmp_path / "node" / "config.json").read_text())["hub"]


def test_hub_identity_makes_the_key_once_and_prints_the_aid(tmp_path, env):
    data = str(tmp_path / "hub")
    made = anet("hub", "identity", "--data", data, "--json", env=env)
    assert made.returncode == 0, made.stderr
    first = json.loads(made.stdout)
    assert first["created"] is True
    assert first["aid"] == Identity.load(tmp_path / "hub" / "identity").aid
    again = anet("hub", "identity", "--data", data, env=env)
    assert (again.returncode, again.stdout) == (0, first["aid"] + "\n")
    assert oct(os.stat(tmp_path / "hub").st_mode & 0o777) == "0o700"
