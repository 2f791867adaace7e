"""The tokens of the published surface: ``<data>/modules/a2a/publish_tokens.json`` (mode 0600).

Only the SHA-256 of each token is kept, under the name the operator gave it; the token itself is
printed once by ``anet publish token add`` (or ``rotate``) and never again. The listener reads
the file again whenever it is replaced, so a revoked or rotated token is refused from the next
request on. A token may be limited to some aliases; without a limit it reaches every published
alias.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anet_a2a import NAME
from anet_core.api import AnetError, write_private

TOKEN_PREFIX = "anet_pub_"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class PublishToken:
    """A token as the file keeps it: its name, its hash, when it was made, its aliases."""

    name: str
    hash: str
    created_at: float
    aliases: tuple[str, ...] = ()

    def reaches(self, alias: str) -> bool:
        return not self.aliases or alias in self.aliases

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "hash": self.hash, "createdAt": self.created_at,
                "aliases": list(self.aliases)}

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> PublishToken:
        return cls(name=str(entry["name"]), hash=str(entry["hash"]),
                   created_at=float(entry["createdAt"]),
                   aliases=tuple(str(alias) for alias in entry.get("aliases", [])))


class PublishTokens:
    """The file, read again when it changed (by inode and mtime)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._tokens: tuple[PublishToken, ...] = ()

    def all(self) -> tuple[PublishToken, ...]:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._tokens = None, ()
            return ()
        stamp = (stat.st_ino, stat.st_mtime_ns)
        if stamp != self._stamp:
            try:
                document = json.loads(self.path.read_text(encoding="utf-8"))
                self._tokens = tuple(PublishToken.from_dict(entry)
                                     for entry in document.get("tokens", []))
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                raise AnetError("publish-tokens-invalid", f"{self.path} cannot be read: {error}",
                                hint="move it away and add the tokens again") from None
            self._stamp = stamp
        return self._tokens

    def match(self, presented: str) -> PublishToken | None:
        """The token whose hash ``presented`` has, compared in constant time."""
        if not presented:
            return None
        digest = token_hash(presented)
        found = None
        for token in self.all():
            if hmac.compare_digest(token.hash, digest):
                found = token
        return found

    def _write(self, tokens: list[PublishToken]) -> None:
        write_private(self.path, json.dumps({"tokens": [token.as_dict() for token in tokens]},
                                            indent=2) + "\n")

    def add(self, name: str, aliases: list[str]) -> str:
        """A new token named ``name``; returns the token (shown once, never stored)."""
        if not NAME.match(name):
            raise AnetError("publish-token-name", f"token name {name[:80]!r} must be 1-64 "
                                                  "characters of A-Z, a-z, 0-9, _ and -")
        tokens = list(self.all())
        if any(token.name == name for token in tokens):
            raise AnetError("publish-token-exists", f"a token named {name!r} exists already",
                            hint=f"`anet publish token rotate {name}` replaces it")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        tokens.append(PublishToken(name, token_hash(secret), time.time(), tuple(aliases)))
        self._write(tokens)
        return secret

    def revoke(self, name: str) -> None:
        tokens = list(self.all())
        kept = [token for token in tokens if token.name != name]
        if len(kept) == len(tokens):
            raise AnetError("publish-token-unknown", f"no token is named {name!r}",
                            hint="`anet publish token list` lists them")
        self._write(kept)

    def rotate(self, name: str) -> str:
        """A new token under the same name and aliases; the old one is refused from now on."""
        tokens = list(self.all())
        old = next((token for token in tokens if token.name == name), None)
        if old is None:
            raise AnetError("publish-token-unknown", f"no token is named {name!r}",
                            hint=f"`anet publish token add {name}` makes one")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self._write([PublishToken(name, token_hash(secret), time.time(), old.aliases)
                     if token.name == name else token for token in tokens])
        return secret
