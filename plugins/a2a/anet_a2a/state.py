"""The interface's state directory: address, token, port conflict and the emergency-rotation mark.

``<data>/modules/a2a/``::

    a2a_addr.txt            host:port, chosen once from PORT_RANGE and bound again on every start
    a2a_token.txt           the bearer token (0600), replaced when the address changes, on
                            ``anet a2a rotate-token`` and after an emergency key rotation
    a2a_port_conflict.txt   written while the recorded port is held by another process
    a2a_key_mark.txt        the last emergency key statement the token was replaced for
    publish_tokens.json     hashes of the published surface's tokens (0600; publish/tokens.py)
    peer_tasks.db           tasks sent to direct peers (peers/store.py)
"""

from __future__ import annotations

import random
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from anet_a2a import MODULE
from anet_core.api import DataPaths, TokenFile, bind_loopback, write_atomic

if TYPE_CHECKING:
    from anet_core.api import Identity

PORT_RANGE = range(43811, 45811)
HOST = "127.0.0.1"


@dataclass(frozen=True)
class StateDir:
    """The files of the interface in ``<data>/modules/a2a/``."""

    root: Path

    @classmethod
    def of(cls, paths: DataPaths) -> StateDir:
        return cls(paths.module_dir(MODULE))

    @property
    def address_file(self) -> Path:
        return self.root / "a2a_addr.txt"

    @property
    def token_file(self) -> Path:
        return self.root / "a2a_token.txt"

    @property
    def conflict_file(self) -> Path:
        return self.root / "a2a_port_conflict.txt"

    @property
    def publish_tokens_file(self) -> Path:
        return self.root / "publish_tokens.json"

    @property
    def key_mark_file(self) -> Path:
        return self.root / "a2a_key_mark.txt"

    def token(self) -> TokenFile:
        return TokenFile(self.token_file)

    def recorded_port(self) -> int | None:
        """The port in a2a_addr.txt, or None when no address was recorded (or it is unusable)."""
        try:
            host, _, port = self.address_file.read_text(encoding="ascii").strip().rpartition(":")
        except FileNotFoundError:
            return None
        return int(port) if host == HOST and port.isdigit() and 0 < int(port) < 65536 else None

    def record_port(self, port: int) -> None:
        write_atomic(self.address_file, f"{HOST}:{port}\n".encode())

    def record_conflict(self, text: str) -> None:
        write_atomic(self.conflict_file, text.encode())

    def clear_conflict(self) -> None:
        self.conflict_file.unlink(missing_ok=True)


def choose_port(rng: random.Random | None = None) -> socket.socket:
    """Bind a free port of PORT_RANGE, tried in random order (two nodes on one machine rarely
    collide). Raises OSError when every port of the range is taken."""
    ports = list(PORT_RANGE)
    (rng or random.SystemRandom()).shuffle(ports)
    for port in ports:
        try:
            return bind_loopback(port)
        except OSError:
            continue
    raise OSError(f"every port from {PORT_RANGE.start} to {PORT_RANGE.stop - 1} is taken")


def latest_emergency(identity: Identity) -> str:
    """The hash of the newest emergency statement of this node's key history, "" if none."""
    emergencies = [s for s in identity.verified_history.statements if s.kind == "emergency"]
    return emergencies[-1].hash if emergencies else ""


def replace_token_after_emergency(state: StateDir, identity: Identity) -> bool:
    """Replace the token when the key history holds an emergency rotation the token predates.

    An emergency rotation means a key was compromised; whoever had it may have read the token
    too. Returns True when the token was replaced.
    """
    mark = latest_emergency(identity)
    try:
        seen = state.key_mark_file.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        seen = None
    if seen == mark:
        return False
    write_atomic(state.key_mark_file, f"{mark}\n".encode())
    if seen is None and not mark:
        return False  # first start of a node that never had an emergency: nothing to replace
    state.token().replace()
    return True


def conflict_text(port: int, holder: str, token_replaced: bool) -> str:
    """The content of a2a_port_conflict.txt: one sentence first (doctor shows it), then the
    remedy."""
    lines = [
        f"port {port} of the local A2A interface ({HOST}:{port}, from a2a_addr.txt) is held by "
        f"{holder}; the interface is down",
        "",
        "The interface does not move to another port: clients configured with this address would",
        "send the token to whichever process holds it. Free the port, then:",
        "  anet stop && anet up",
        "  anet agents wire --refresh",
    ]
    if token_replaced:
        lines += ["", "The token was replaced because the holder may belong to another local user;",
                  "clients need the new a2a_token.txt."]
    lines += ["", f"written {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"]
    return "\n".join(lines) + "\n"
