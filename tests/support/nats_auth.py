"""NATS's decentralized authentication for the tests, as ``nsc`` sets it up: an operator, an
account it signs and a user the account signs, each an NKey with a JWT
(https://docs.nats.io/running-a-nats-service/configuration/securing_nats/jwt). The server
trusts the operator and has the account preloaded; the user signs in with a ``.creds`` file."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import nkeys

UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
             "wildcards": True, "conn": -1, "leaf": -1}


def new_key(prefix: int) -> tuple[bytes, nkeys.KeyPair]:
    """A new NKey: its seed (``S…``, the secret) and its key pair."""
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return seed, nkeys.from_seed(seed)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt(issuer: nkeys.KeyPair, subject: str, name: str, claims: dict[str, object]) -> str:
    body: dict[str, object] = {"iat": int(time.time()), "iss": issuer.public_key.decode(),
                               "name": name, "sub": subject, "nats": claims}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    body["jti"] = base64.b32encode(digest).decode().rstrip("=")
    signing = f"{_b64(json.dumps({'typ': 'JWT', 'alg': 'ed25519-nkey'}).encode())}." \
              f"{_b64(json.dumps(body).encode())}"
    return f"{signing}.{_b64(issuer.sign(signing.encode()))}"


@dataclass(frozen=True)
class Operator:
    server_config: str
    """The lines of ``nats.conf`` that make the server trust it and know the account."""
    creds: str
    """The user's ``.creds`` file: its JWT and its seed."""
    seed: str

    @classmethod
    def create(cls) -> Operator:
        _, operator = new_key(nkeys.PREFIX_BYTE_OPERATOR)
        _, account = new_key(nkeys.PREFIX_BYTE_ACCOUNT)
        seed, user = new_key(nkeys.PREFIX_BYTE_USER)
        account_id = account.public_key.decode()
        operator_jwt = _jwt(operator, operator.public_key.decode(), "test operator",
                            {"type": "operator", "version": 2})
        account_jwt = _jwt(operator, account_id, "hub",
                           {"type": "account", "version": 2, "limits": UNLIMITED})
        user_jwt = _jwt(account, user.public_key.decode(), "hub",
                        {"type": "user", "version": 2, "pub": {}, "sub": {}, "subs": -1,
                         "data": -1, "payload": -1})
        config = (f'operator: "{operator_jwt}"\nresolver: MEMORY\n'
                  f'resolver_preload: {{ {account_id}: "{account_jwt}" }}\n')
        creds = (f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
                 f"-----BEGIN USER NKEY SEED-----\n{seed.decode()}\n"
                 "------END USER NKEY SEED------\n")
        return cls(config, creds, seed.decode())

    def write_creds(self, path: Path) -> Path:
        path.write_text(self.creds)
        path.chmod(0o600)
        return path
