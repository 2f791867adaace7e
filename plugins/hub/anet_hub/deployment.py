"""Which storage and broker a hub's data directory uses, so every command on it finds them.

``anet hub serve --postgres URL --nats URL`` records both in ``DIR/cluster.json``; ``anet hub
approve|pending|official|doctor --data DIR`` read it and open the same PostgreSQL. Without it the
hub is the embedded one (``DIR/hub.db``). URLs never carry a password (they are on command
lines and in that file): PostgreSQL reads it from ``PGPASSWORD`` or ``~/.pgpass``, as its own
tools do (https://www.postgresql.org/docs/16/libpq-pgpass.html), and NATS its credentials from
the environment (``anet_hub.credentials``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from anet_core.api import AnetError, write_atomic
from anet_hub.credentials import check_postgres_url
from anet_hub.sqlite import SqliteHubStorage
from anet_hub.storage import HubStorage, StorageError, redacted

CLUSTER_FILE = "cluster.json"
SQLITE_FILE = "hub.db"
CLUSTER_EXTRA = "pip install 'anet-hub[cluster]'"


@dataclass(frozen=True)
class Deployment:
    postgres: str | None = None
    nats: str | None = None

    def __post_init__(self) -> None:
        if self.nats and not self.postgres:
            raise ValueError("--nats routes between instances that share a PostgreSQL: "
                             "give --postgres too")
        if self.postgres:
            _check_url(self.postgres, "--postgres", ("postgres", "postgresql"))
            check_postgres_url(self.postgres)
        for server in (self.nats or "").split(",") if self.nats else ():
            _check_url(server, "--nats", ("nats", "tls"))
            if urlsplit(server.strip()).username is not None:
                raise ValueError("--nats: the URL holds credentials; give them in NATS_USER and "
                                 "NATS_PASSWORD, NATS_TOKEN, NATS_NKEY or NATS_CREDS instead")

    @property
    def clustered(self) -> bool:
        return self.postgres is not None

    @classmethod
    def read(cls, data_dir: Path) -> Deployment:
        path = data_dir / CLUSTER_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as error:
            raise AnetError("hub-bad-cluster-file", f"{path}: {error}",
                            hint="start the hub once with `anet hub serve --postgres …` to "
                                 "write it again") from None
        return cls(postgres=raw.get("postgres"), nats=raw.get("nats"))

    def write(self, data_dir: Path) -> None:
        path = data_dir / CLUSTER_FILE
        if not self.clustered:
            path.unlink(missing_ok=True)
            return
        text = json.dumps({"postgres": self.postgres, "nats": self.nats}, indent=2) + "\n"
        write_atomic(path, text.encode())


def storage_name(data_dir: Path, deployment: Deployment) -> str:
    if deployment.postgres is None:
        return f"SQLite {data_dir / SQLITE_FILE}"
    return f"PostgreSQL {redacted(deployment.postgres)}"


def broker_name(servers: str) -> str:
    """``--nats`` as logs and the doctor name it."""
    return f"NATS {','.join(redacted(url) for url in servers.split(','))}"


def _check_url(url: str, option: str, schemes: tuple[str, ...]) -> None:
    parts = urlsplit(url.strip())
    if parts.scheme not in schemes or not parts.hostname:
        # Not the URL itself: it may hold a secret.
        raise ValueError(f"{option}: expected {schemes[0]}://HOST[:PORT]…, got "
                         f"{parts.scheme or 'no scheme'}://{parts.hostname or ''}…")


async def open_storage(data_dir: Path, deployment: Deployment, *, hub_aid: str | None = None,
                       max_bytes: int | None = None) -> HubStorage:
    """The hub's storage. Raises :class:`StorageError` when PostgreSQL cannot be reached or
    belongs to another hub, :class:`AnetError` when the cluster extra is not installed."""
    if deployment.postgres is None:
        return await SqliteHubStorage.open(data_dir / SQLITE_FILE, max_bytes=max_bytes)
    if max_bytes is not None:
        raise AnetError("hub-bad-option", "--max-storage-mb caps hub.db; a PostgreSQL hub is "
                                          "capped by its database's own quotas")
    try:
        from anet_hub.postgres import PostgresHubStorage
    except ImportError:
        raise AnetError("hub-cluster-missing", "PostgreSQL storage needs the cluster extra",
                        hint=CLUSTER_EXTRA) from None
    return await PostgresHubStorage.open(deployment.postgres, hub_aid=hub_aid)


async def open_existing(data_dir: Path, *, hub_aid: str | None = None) -> HubStorage:
    """The storage of the hub served from ``data_dir`` (for the operator's commands)."""
    deployment = Deployment.read(data_dir)
    if not deployment.clustered and not (data_dir / SQLITE_FILE).exists():
        raise AnetError("hub-no-data", f"{data_dir} holds no hub (no {SQLITE_FILE}, no "
                                       f"{CLUSTER_FILE})",
                        hint="give the --data directory of `anet hub serve`")
    try:
        return await open_storage(data_dir, deployment, hub_aid=hub_aid)
    except StorageError as error:
        raise AnetError(error.reason, error.message,
                        hint="start PostgreSQL, or check the address in "
                             f"{data_dir / CLUSTER_FILE}") from None
