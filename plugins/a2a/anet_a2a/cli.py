"""``anet a2a rotate-token`` and ``anet agents wire`` (Hermes)."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from anet_a2a import hermes
from anet_a2a.state import StateDir
from anet_core.api import AnetError, CliContext, Identity, check_aid

CARD_FETCH_TIMEOUT_S = 10.0
__all__ = ["configure_wire", "run_rotate", "run_wire"]


def _wiring(state: StateDir) -> hermes.Wiring:
    try:
        address = state.address_file.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise AnetError("a2a-no-address", "the local A2A interface has no address yet",
                        hint="start the node once with `anet up`") from None
    token = state.token().current()
    if not token:
        raise AnetError("a2a-no-token", f"{state.token_file} does not exist",
                        hint="start the node once with `anet up`")
    return hermes.Wiring(address=address, token=token)


def _proxy_card(wiring: hermes.Wiring, aid: str) -> dict[str, Any]:
    request = urllib.request.Request(
        wiring.url(aid), headers={"Authorization": f"Bearer {wiring.token}",
                                  "A2A-Version": "1.0"})
    with urllib.request.urlopen(request, timeout=CARD_FETCH_TIMEOUT_S) as response:
        card: dict[str, Any] = json.loads(response.read())
    return card


def refresh_wired(state: StateDir) -> list[str]:
    """Rewrite every Hermes entry anet wrote with the current address and token; one line per
    entry rewritten."""
    wiring = _wiring(state)
    files = hermes.WiredFiles(state.root / "hermes_wired.json")
    return [f"refreshed  {path}: a2a_agents.{name}" for path in files.paths()
            for name in hermes.refresh(path, wiring)]


def _refresh_all(state: StateDir) -> int:
    lines = refresh_wired(state)
    for line in lines:
        print(line)
    return len(lines)


def run_wire(args: argparse.Namespace, ctx: CliContext) -> int:
    state = StateDir.of(ctx.paths)
    wiring = _wiring(state)
    if args.refresh:
        if args.target or args.aids:
            raise AnetError("wire-usage", "--refresh rewrites every entry anet wrote; "
                                          "give it no target and no --a2a")
        if not _refresh_all(state):
            print("no entries written by anet were found; nothing to refresh")
        return 0
    if args.target != "hermes" or not args.aids:
        raise AnetError("wire-usage", "say what to wire: anet agents wire hermes --a2a <aid>",
                        hint="or `anet agents wire --refresh` after the address or token changed")
    if args.name and len(args.aids) > 1:
        raise AnetError("wire-usage", "--name names one entry; give one --a2a with it")
    path = hermes.config_path(args.profile)
    own = Identity.load(ctx.paths.identity).aid if ctx.paths.identity.exists() else None
    for aid in args.aids:
        check_aid(aid, hint="`anet agents` lists the remote agents")
        if aid == own:
            raise AnetError("wire-aid-own", f"{aid} is this node itself, not a remote agent",
                            hint="`anet agents` lists the remote agents")
        try:
            capabilities = hermes.capabilities_of(_proxy_card(wiring, aid))
        except (urllib.error.URLError, OSError, ValueError) as error:
            if isinstance(error, urllib.error.HTTPError) and error.code == 404:
                raise AnetError("wire-aid-unknown",
                                f"no agent {aid} is known to this node or its hub",
                                hint="`anet agents` lists the remote agents") from None
            capabilities = []
            print(f"warning: the card of {aid} could not be read ({error}); the entry has no "
                  "capabilities", file=sys.stderr)
        name = hermes.entry_name(aid, args.name)
        hermes.wire(path, name, aid, wiring, capabilities)
        hermes.WiredFiles(state.root / "hermes_wired.json").add(path)
        print(f"wired      {path}: a2a_agents.{name} -> {wiring.url(aid)}")
    print("Next: `hermes tools enable a2a --platform cli` (or your platform): the a2a toolset "
          "is off by default.")
    return 0


def run_rotate(args: argparse.Namespace, ctx: CliContext) -> int:
    state = StateDir.of(ctx.paths)
    state.token().replace()
    print(f"replaced   {state.token_file}; the old token is refused from the next request on")
    if state.address_file.exists():
        _refresh_all(state)
    print("Clients configured by hand need the new token.")
    return 0


def configure_wire(wire: argparse.ArgumentParser) -> None:
    wire.add_argument("target", nargs="?", choices=["hermes"], help="the client to configure")
    wire.add_argument("--a2a", dest="aids", action="append", default=[], metavar="AID",
                      help="a remote agent to wire (repeatable)")
    wire.add_argument("--profile", help="a Hermes profile (~/.hermes/profiles/PROFILE)")
    wire.add_argument("--name", help="the entry's name (default: the AID)")
    wire.add_argument("--refresh", action="store_true",
                      help="rewrite every entry anet wrote with the current address and token")
