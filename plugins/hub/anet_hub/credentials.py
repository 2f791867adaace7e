"""How a hub instance proves itself to NATS and PostgreSQL: never on its command line, in
``cluster.json`` or in a log line (docs/hub.md, "Credentials").

PostgreSQL is reached the way its own tools reach it, which asyncpg follows: the password in
``PGPASSWORD`` or in a password file (``PGPASSFILE``, by default ``~/.pgpass``), TLS by the URL's
``sslmode``, ``sslrootcert``, ``sslcert`` and ``sslkey`` parameters (or ``PGSSLMODE`` …). A URL
that holds a password is refused (:func:`check_postgres_url`).

NATS by the environment, with the NATS command line's names:

``NATS_CREDS``                a ``.creds`` file: a user JWT and its NKey seed (``nsc``)
``NATS_NKEY``                 a file holding an NKey seed (``SU…``)
``NATS_USER``, ``NATS_PASSWORD``   a user and its password
``NATS_TOKEN``                a token
``NATS_CA``                   the CA file that signed the servers' certificates (TLS; a
                              ``tls://`` URL alone trusts the system's CAs)
``NATS_CERT``, ``NATS_KEY``   this instance's certificate and key files (mutual TLS)
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

SECRET_QUERY_KEYS = frozenset({"password"})
"""URL parameters asyncpg would read a password from."""


@dataclass(frozen=True)
class BrokerCredentials:
    """What the hub gives ``nats.connect`` besides the servers, read from the environment."""

    options: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def description(self) -> str:
        """How the instance signs in, as a log line may say it (nothing secret)."""
        options = self.options
        said = ("a .creds file" if "user_credentials" in options else
                "an NKey" if "nkeys_seed" in options else
                f"user {options['user']}" if "user" in options else
                "a token" if "token" in options else "no credentials")
        return said + (", TLS" if "tls" in options else "")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> BrokerCredentials:
        """Raises ``ValueError`` naming the variable and the fix."""
        env = os.environ if environ is None else environ
        given = [name for name in ("NATS_CREDS", "NATS_NKEY", "NATS_USER", "NATS_TOKEN")
                 if env.get(name)]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} are set: an instance authenticates to NATS "
                             "one way; unset all but one")
        if env.get("NATS_PASSWORD") and not env.get("NATS_USER"):
            raise ValueError("NATS_PASSWORD is set without NATS_USER: set the user it belongs "
                             "to")
        options: dict[str, Any] = {}
        if creds := env.get("NATS_CREDS"):
            options["user_credentials"] = _readable("NATS_CREDS", creds)
        elif nkey := env.get("NATS_NKEY"):
            options["nkeys_seed"] = _readable("NATS_NKEY", nkey)
        elif user := env.get("NATS_USER"):
            options.update(user=user, password=env.get("NATS_PASSWORD", ""))
        elif token := env.get("NATS_TOKEN"):
            options["token"] = token
        context = _tls_context(env)
        if context is not None:
            options["tls"] = context
        return cls(options)


def _tls_context(env: Mapping[str, str]) -> ssl.SSLContext | None:
    ca, cert, key = env.get("NATS_CA"), env.get("NATS_CERT"), env.get("NATS_KEY")
    if bool(cert) != bool(key):
        raise ValueError("NATS_CERT and NATS_KEY go together: the certificate and its key")
    if not (ca or cert):
        return None
    try:
        context = ssl.create_default_context(
            cafile=_readable("NATS_CA", ca) if ca else None)
        if cert and key:
            context.load_cert_chain(_readable("NATS_CERT", cert), _readable("NATS_KEY", key))
    except ssl.SSLError as error:
        raise ValueError(f"the TLS files in NATS_CA, NATS_CERT or NATS_KEY do not load: "
                         f"{error.reason or error}") from None
    return context


def _readable(variable: str, path: str) -> str:
    if not os.access(path, os.R_OK) or not Path(path).is_file():
        raise ValueError(f"{variable}={path}: no readable file there; give the path of the "
                         "file, readable by the hub's account")
    return path


def check_postgres_url(url: str) -> None:
    """Refuse a password in the URL (``user:password@`` or ``?password=``): the URL is on the
    command line and in ``cluster.json``."""
    parts = urlsplit(url)
    if parts.password is not None or SECRET_QUERY_KEYS & parse_qs(parts.query).keys():
        raise ValueError("--postgres: the URL holds a password; put it in PGPASSWORD or in a "
                         "password file (PGPASSFILE, ~/.pgpass)")
