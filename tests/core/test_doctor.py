"""The doctor reads the daemon's status once, off the event loop: a daemon that accepts and
never answers fails the checks that need its status and leaves the others alone."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from anet_core.settings import DataPaths
from anet_core.util.fsutil import write_private

STATUS_CHECKS = ("daemon", "hub-connection", "card-charge")
OTHER_CHECKS = ("config-valid", "data-dir", "secrets-private", "identity")


@contextlib.contextmanager
def hung_daemon(paths: DataPaths) -> Iterator[None]:
    """A "daemon" for ``paths``: it holds the pid file (as the daemon does) and a control
    listener on loopback that accepts every connection and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    paths.logs.mkdir(parents=True, exist_ok=True)
    with open(paths.pid_file, "w") as pid_file:
        fcntl.flock(pid_file, fcntl.LOCK_EX)
        pid_file.write(f"{os.getpid()}\n")
        pid_file.flush()
        write_private(paths.control_addr, f"127.0.0.1:{listener.getsockname()[1]}\n")
        # The a2a interface's check reads the status too once the interface recorded an address.
        write_private(paths.module_dir("a2a") / "a2a_addr.txt", "127.0.0.1:43811\n")
        try:
            yield
        finally:
            done.set()
            thread.join(5)
            for connection in accepted:
                connection.close()
            listener.close()
            paths.control_addr.unlink(missing_ok=True)
    assert accepted, "the doctor never asked the daemon"


# Without the fix each status-reading check blocks the event loop for the client's 5 s in turn
# (15 s with the a2a module), and the other checks stall behind them: this bound fails then.
@pytest.mark.timeout(12)
def test_a_hung_daemon_fails_the_status_checks_and_stalls_no_other(anet, data_dir: Path) -> None:
    anet("init", check=True)
    with hung_daemon(DataPaths(data_dir)):
        result = anet("doctor", "--json")
    assert result.returncode == 1, result.stderr
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    for name in OTHER_CHECKS:
        assert checks[name]["status"] == "ok", checks[name]
    for name in STATUS_CHECKS + (("a2a-interface",) if "a2a-interface" in checks else ()):
        assert checks[name]["status"] == "fail", checks[name]
        assert "did not answer: timed out" in checks[name]["summary"], checks[name]
