"""The engines' credentials (docs/hub.md, "Credentials"): an instance signs in to a NATS that
requires a user and password over mutual TLS, a token, or an NKey, and to a PostgreSQL that
requires a password over TLS with the server's certificate verified; the secrets come from the
environment or a file and are never on the instance's command line, in ``cluster.json`` or in its
log. Wrong or missing ones stop the instance with the documented code, the secret unsaid.
Real servers: nats-server with its configuration file; PostgreSQL 16 behind PostgreSQL's own TLS
handshake (``PostgresTls``: the wheel's server is built without TLS)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nkeys
import pytest

from anet_hub.credentials import BrokerCredentials
from tests.hub.servers import (  # noqa: F401 - the fixture
    NatsServer,
    PostgresServer,
    PostgresTls,
    postgres,
)
from tests.support.hubs import get_json
from tests.support.nats_auth import Operator, new_key
from tests.support.processes import ANET, REPO, HubProcess, free_port
from tests.support.tls import CertificateAuthority, Issued

pytestmark = pytest.mark.timeout(180)

SECRET = f"s3cret-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("ca"))


@contextmanager
def nats_with(config: str) -> Iterator[NatsServer]:
    server = NatsServer.create(config)
    try:
        yield server.start()
    finally:
        server.remove()


def serve(data: Path, options: list[str], env: dict[str, str]) -> HubProcess:
    return HubProcess(data, free_port(), options=tuple(options), env=env).start()


def refused(data: Path, options: list[str], env: dict[str, str]) -> str:
    """``anet hub serve`` that must exit 1 at start: its stderr."""
    result = subprocess.run([*ANET, "hub", "serve", "--listen", f"127.0.0.1:{free_port()}",
                             "--data", str(data), *options], capture_output=True, text=True,
                            timeout=60, cwd=REPO, env={**os.environ, **env}, check=False)
    assert result.returncode == 1, result.stderr
    return result.stderr


async def assert_ready_and_unsaid(hub: HubProcess, secret: str) -> str:
    """The instance is ready, and ``secret`` is not in its argv, cluster.json or log."""
    status, ready = await get_json(f"http://127.0.0.1:{hub.port}/readyz")
    assert status == 200 and ready["ready"] is True, ready
    assert hub.process is not None
    cmdline = Path(f"/proc/{hub.process.pid}/cmdline").read_bytes()
    log = (hub.data.parent / "hub.log").read_text()
    for where, text in (("argv", cmdline.decode(errors="replace")), ("log", log),
                        ("cluster.json", (hub.data / "cluster.json").read_text())):
        assert secret not in text, f"the secret is in the instance's {where}"
    return log


async def test_nats_user_and_password_over_mutual_tls(
        tmp_path: Path, authority: CertificateAuthority,
        postgres: PostgresServer) -> None:  # noqa: F811 - the fixture
    server, client = authority.issue("nats", server=True), authority.issue("hub", server=False)
    with nats_with(f"""
        tls {{ cert_file: "{server.cert}", key_file: "{server.key}", ca_file: "{authority.ca}",
               verify: true }}
        authorization {{ user: hub, password: "{SECRET}" }}
    """) as nats:
        await user_and_password(tmp_path, authority, client, nats, postgres)


async def user_and_password(tmp_path: Path, authority: CertificateAuthority, client: Issued,
                            nats: NatsServer, postgres: PostgresServer) -> None:  # noqa: F811
    database = postgres.create_database(f"hub_{uuid.uuid4().hex[:12]}")
    options = ["--postgres", database, "--nats", f"tls://127.0.0.1:{nats.port}"]
    env = {"NATS_USER": "hub", "NATS_PASSWORD": SECRET, **tls_env(authority, client)}
    hub = serve(tmp_path / "hub", options, env)
    try:
        log = await assert_ready_and_unsaid(hub, SECRET)
        assert "(user hub, TLS)" in log
        doctor = subprocess.run([*ANET, "hub", "doctor", "--data", str(hub.data)],
                                capture_output=True, text=True, timeout=60, cwd=REPO,
                                env={**os.environ, **env}, check=False)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    finally:
        hub.stop()

    wrong = refused(tmp_path / "hub", options, {**env, "NATS_PASSWORD": "not-it"})
    assert "hub-broker-unreachable" in wrong and "authorization" in wrong.lower(), wrong
    untrusted = refused(tmp_path / "hub", options, {**env, "NATS_CA": str(client.cert)})
    assert "hub-broker-unreachable" in untrusted, untrusted
    assert SECRET not in wrong + untrusted
    mixed = refused(tmp_path / "hub", options, {**env, "NATS_TOKEN": SECRET})
    assert "NATS_USER and NATS_TOKEN are set" in mixed and SECRET not in mixed


def tls_env(authority: CertificateAuthority, client: Issued) -> dict[str, str]:
    return {"NATS_CA": str(authority.ca), "NATS_CERT": str(client.cert),
            "NATS_KEY": str(client.key)}


@pytest.mark.parametrize("method", ["token", "nkey", "creds"])
async def test_nats_token_nkey_or_creds(tmp_path: Path, method: str,
                                        postgres: PostgresServer) -> None:  # noqa: F811
    config, env, said, secret = broker_auth(method, tmp_path)
    database = postgres.create_database(f"hub_{uuid.uuid4().hex[:12]}")
    with nats_with(config) as nats:
        options = ["--postgres", database, "--nats", nats.url]
        hub = serve(tmp_path / "hub", options, env)
        try:
            assert f"({said})" in await assert_ready_and_unsaid(hub, secret)
        finally:
            hub.stop()
        anonymous = refused(tmp_path / "hub", options, {})
    assert "hub-broker-unreachable" in anonymous, anonymous


def broker_auth(method: str, tmp_path: Path) -> tuple[str, dict[str, str], str, str]:
    """The server's configuration, the instance's environment, how its log says it signed in,
    and the secret that must go unsaid."""
    if method == "token":
        return f'authorization {{ token: "{SECRET}" }}', {"NATS_TOKEN": SECRET}, "a token", SECRET
    if method == "nkey":
        seed, user = new_key(nkeys.PREFIX_BYTE_USER)
        seed_file = tmp_path / "hub.nk"
        seed_file.write_bytes(seed)
        seed_file.chmod(0o600)
        return (f'authorization {{ users: [ {{ nkey: "{user.public_key.decode()}" }} ] }}',
                {"NATS_NKEY": str(seed_file)}, "an NKey", seed.decode())
    operator = Operator.create()
    return (operator.server_config,
            {"NATS_CREDS": str(operator.write_creds(tmp_path / "hub.creds"))},
            "a .creds file", operator.seed)


async def test_postgres_password_from_a_file_over_verified_tls(
        tmp_path: Path, authority: CertificateAuthority) -> None:
    server = PostgresServer.create()
    cert = authority.issue("postgres", server=True)
    tls = PostgresTls(server.port, cert.cert, cert.key)
    try:
        server.require_passwords()
        server.start()
        tls.start()
        server.psql(f"CREATE ROLE hub LOGIN PASSWORD '{SECRET}'")
        server.psql("CREATE DATABASE hub_tls OWNER hub")
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"127.0.0.1:{tls.port}:hub_tls:hub:{SECRET}\n")
        passfile.chmod(0o600)
        url = (f"postgresql://hub@127.0.0.1:{tls.port}/hub_tls?sslmode=verify-full&"
               f"sslrootcert={authority.ca}")
        home = {"HOME": str(tmp_path)}  # no ~/.pgpass of the account running the tests
        hub = serve(tmp_path / "hub", ["--postgres", url], {"PGPASSFILE": str(passfile), **home})
        try:
            await assert_ready_and_unsaid(hub, SECRET)
        finally:
            hub.stop()

        missing = refused(tmp_path / "hub", ["--postgres", url], home)
        assert "hub-storage-unreachable" in missing and "password" in missing, missing
        in_url = refused(tmp_path / "hub", ["--postgres", f"{url}&password={SECRET}"], home)
        assert "holds a password" in in_url and SECRET not in in_url, in_url
        other_ca = CertificateAuthority.create(tmp_path / "other-ca")
        untrusted = refused(tmp_path / "hub", ["--postgres", url.replace(
            str(authority.ca), str(other_ca.ca))], {"PGPASSFILE": str(passfile), **home})
        assert "hub-storage-unreachable" in untrusted and "certificate" in untrusted, untrusted
    finally:
        tls.stop()
        server.remove()


@pytest.mark.parametrize(("environ", "says"), [
    ({"NATS_NKEY": "/nowhere/hub.nk"}, "NATS_NKEY=/nowhere/hub.nk: no readable file there"),
    ({"NATS_CREDS": "c", "NATS_USER": "u"}, "NATS_CREDS and NATS_USER are set"),
    ({"NATS_PASSWORD": "p"}, "NATS_PASSWORD is set without NATS_USER"),
    ({"NATS_CERT": "c"}, "NATS_CERT and NATS_KEY go together"),
])
def test_broker_credentials_that_cannot_be_used_are_named(environ: dict[str, str],
                                                          says: str) -> None:
    with pytest.raises(ValueError, match=says):
        BrokerCredentials.from_environment(environ)


def test_broker_credentials_say_how_without_the_secret(tmp_path: Path) -> None:
    assert BrokerCredentials.from_environment({}).description == "no credentials"
    user = BrokerCredentials.from_environment({"NATS_USER": "hub", "NATS_PASSWORD": SECRET})
    assert user.options == {"user": "hub", "password": SECRET}
    assert user.description == "user hub" and SECRET not in repr(user)
