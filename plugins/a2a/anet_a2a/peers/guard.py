"""The SSRF rules of the outbound client, in one place: which URLs and addresses it may reach.

- a URL is http or https, names a host, and carries no user information (the
  ``http://public.example:80@127.0.0.1/`` trick);
- every address a host resolves to is checked: loopback, private, link-local and other
  non-public addresses are refused unless ``allow_private_hosts`` is set or the host is on
  ``allowed_private_hosts`` (which admits those hosts and no other); cloud metadata addresses are
  refused always;
- the connection goes to exactly the addresses that passed (:class:`PinnedResolver`), so a
  name cannot resolve to another address between the check and the connect (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp.abc import AbstractResolver
from yarl import URL

from anet_core.api import AnetError

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``: how host names become IP addresses (injectable in tests)."""

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(ipaddress.ip_address(text) for text in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack
    "169.254.170.2",    # AWS ECS task metadata
    "100.100.100.200",  # Alibaba Cloud
    "fd00:ec2::254",    # AWS over IPv6
))
NAT64 = ipaddress.ip_network("64:ff9b::/96")
"""The well-known NAT64 prefix: such an address reaches the IPv4 address in its last 32 bits."""


class PeerError(AnetError):
    """A call to a direct peer that did not happen or did not succeed; ``reason`` is one of
    peer-url-invalid, peer-host-refused, peer-unresolvable, peer-unreachable, peer-timeout,
    peer-redirect, peer-too-large, peer-http-status, peer-unauthorized, peer-not-found,
    peer-rate-limited, peer-bad-answer, peer-rpc-error, peer-token-unresolved,
    peer-origin-mismatch, peer-no-card."""


def check_url(text: str, *, what: str = "url") -> URL:
    """``text`` as a URL the client may call, or PeerError naming what is wrong with it."""
    try:
        url = URL(text)
    except (ValueError, TypeError) as error:
        raise PeerError("peer-url-invalid", f"{what} {text[:120]!r} is not a URL: {error}") \
            from None
    if url.scheme not in {"http", "https"}:
        raise PeerError("peer-url-invalid",
                        f"{what} {text[:120]!r} must start with http:// or https://")
    if url.user is not None or url.password is not None:
        raise PeerError("peer-url-invalid",
                        f"{what} {text[:120]!r} carries user information before the host; "
                        "write the host alone (a token goes in the peer's token)")
    if not url.raw_host:
        raise PeerError("peer-url-invalid", f"{what} {text[:120]!r} names no host")
    if url.fragment or url.query_string:
        raise PeerError("peer-url-invalid",
                        f"{what} {text[:120]!r} must have no query and no fragment")
    return url


def origin(url: URL) -> tuple[str, str, int | None]:
    """scheme, host and port: two URLs with the same origin reach the same server."""
    return url.scheme, (url.raw_host or "").lower().rstrip("."), url.port


def _embedded(address: IpAddress) -> IpAddress:
    """The IPv4 address an IPv4-mapped or NAT64 IPv6 address reaches, else the address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _kind(address: IpAddress) -> str:
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private:
        return "a private address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_unspecified:
        return "the unspecified address"
    return "not a public address"


def address_refusal(text: str, *, private_allowed: bool) -> str | None:
    """Why the client may not connect to the address ``text``, or None when it may."""
    try:
        address = _embedded(ipaddress.ip_address(text.split("%", 1)[0]))
    except ValueError:
        return f"{text[:80]!r} is not an IP address"
    if address in METADATA_ADDRESSES:
        return f"{address} is a cloud metadata address, which is never allowed"
    if address.is_multicast or address.is_unspecified:
        return f"{address} is {_kind(address)}"
    if not address.is_global and not private_allowed:
        return f"{address} is {_kind(address)}"
    return None


@dataclass(frozen=True)
class HostPolicy:
    """``allow_private_hosts`` and ``allowed_private_hosts`` of ``modules.a2a``."""

    allow_private: bool = False
    allowed_hosts: tuple[str, ...] = ()

    def private_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".").strip("[]")
        return self.allow_private or any(
            host == entry or (entry.startswith("*.") and host.endswith(entry[1:]))
            for entry in self.allowed_hosts)


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class PinnedHost:
    """A host and the addresses that passed the checks: the only ones connected to."""

    host: str
    port: int
    addresses: tuple[str, ...]


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


async def _addresses(host: str, port: int, resolver: Resolver) -> tuple[str, ...]:
    literal = _literal(host)
    if literal is not None:
        return (literal,)
    try:
        addresses = tuple(await resolver(host, port))
    except OSError as error:
        raise PeerError("peer-unresolvable", f"{host} cannot be resolved: {error}") from None
    if not addresses:
        raise PeerError("peer-unresolvable", f"{host} resolves to no address")
    return addresses


async def pin(url: URL, policy: HostPolicy, resolver: Resolver) -> PinnedHost:
    """Resolve the host of ``url`` once and check every address; PeerError when one fails (a
    mixed answer is refused: the connect could pick the refused address)."""
    host = (url.raw_host or "").strip("[]")
    port = url.port or (443 if url.scheme == "https" else 80)
    private_allowed = policy.private_allowed(host)
    addresses = await _addresses(host, port, resolver)
    for address in addresses:
        refusal = address_refusal(address, private_allowed=private_allowed)
        if refusal is not None:
            shown = f"{host} resolves to {address}: " if address != host else ""
            raise PeerError("peer-host-refused", f"{shown}{refusal}",
                            hint="for a deployment on this machine or your network, add the host "
                                 "to modules.a2a.allowed_private_hosts (or set "
                                 "allow_private_hosts)")
    return PinnedHost(host=host, port=port, addresses=addresses)


class PinnedResolver(AbstractResolver):
    """aiohttp's resolver for one request: the pinned host resolves to its checked addresses,
    any other name to nothing."""

    def __init__(self, pinned: PinnedHost) -> None:
        self._pinned = pinned

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        if host.strip("[]").lower() != self._pinned.host.lower():
            raise OSError(f"{host} is not the host this request was checked for")
        return [{"hostname": host, "host": address, "port": port,
                 "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST}
                for address in self._pinned.addresses]

    async def close(self) -> None:
        return None
