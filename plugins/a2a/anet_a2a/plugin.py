"""Hook implementations of the module a2a.

Each hook imports the code it hands to the core, and a command names its functions with
``lazy``: loading this module (every command of ``anet`` does) loads none of the module's code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anet_a2a import AGENTS_PATH, MODULE
from anet_core.api import (
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DirectorySource,
    DoctorCheck,
    KeyRotationStep,
    Lifespan,
    hookimpl,
    lazy,
)

if TYPE_CHECKING:
    from anet_core.api import Config, DataPaths, Identity, Node


@hookimpl
def anet_config_blocks() -> list[ConfigBlock]:
    from anet_a2a.config import A2AConfig

    return [ConfigBlock(module=MODULE, model=A2AConfig)]


@hookimpl
def anet_lifespan(node: Node) -> list[Lifespan]:
    from anet_a2a.peers.service import direct_peers
    from anet_a2a.publish.server import published_surface
    from anet_a2a.server import local_a2a

    return [Lifespan(name="a2a-direct-peers", open=lambda: direct_peers(node), module="a2a"),
            Lifespan(name="a2a-endpoint", open=lambda: local_a2a(node), module="a2a"),
            Lifespan(name="a2a-publish", open=lambda: published_surface(node), module="a2a")]


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    from anet_a2a import control
    from anet_a2a.peers import control as peer_control
    from anet_a2a.publish import control as publish_control

    return [ControlRoutes(module=MODULE,
                          routes=[*control.control_routes().routes, *peer_control.routes(),
                                  *publish_control.routes()])]


@hookimpl
def anet_directory_sources(node: Node) -> list[DirectorySource]:
    from anet_a2a import directory

    return [directory.directory_source(node)]


@hookimpl
def anet_doctor_checks(config: Config | None) -> list[DoctorCheck]:
    from anet_a2a import doctor
    from anet_a2a.config import A2AConfig
    from anet_a2a.publish import checks as publish_checks

    block = None if config is None else config.module(MODULE, A2AConfig)
    peer_checks: list[DoctorCheck] = []
    if block is not None and block.peers:  # the peers' client loads only when there are some
        from anet_a2a.peers import checks as peers_checks

        peer_checks = peers_checks.doctor_checks(block)
    return peer_checks + publish_checks.doctor_checks(block) + [
        DoctorCheck("a2a-interface", MODULE, "the local A2A interface is up on its recorded "
                    "address, with no port conflict", doctor.interface_state),
        DoctorCheck("a2a-token", MODULE, "a2a_token.txt exists and only you can read it",
                    doctor.token_mode),
    ]


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    publish = "anet_a2a.publish.commands"
    return [
        CliCommand("a2a rotate-token", "replace a2a_token.txt (refreshes the Hermes entries "
                   "anet wrote)", lambda parser: None, lazy("anet_a2a.cli:run_rotate"),
                   module="a2a"),
        CliCommand("agents peers", "list the direct peers and their agents (modules.a2a.peers)",
                   lazy("anet_a2a.peers.commands:configure_list"),
                   lazy("anet_a2a.peers.commands:run_list"), module="a2a"),
        CliCommand("publish token add", "make a token for the published surface (printed "
                   "once; only its hash is kept)", lazy(f"{publish}:configure_add"),
                   lazy(f"{publish}:run_add"), module="a2a"),
        CliCommand("publish token list", "the tokens of the published surface (names, never "
                   "tokens)", lazy(f"{publish}:configure_list"), lazy(f"{publish}:run_list"),
                   module="a2a"),
        CliCommand("publish token revoke", "refuse a token from the next request on",
                   lazy(f"{publish}:configure_name"), lazy(f"{publish}:run_revoke"),
                   module="a2a"),
        CliCommand("publish token rotate", "replace a token (printed once); the old one is "
                   "refused from the next request on", lazy(f"{publish}:configure_name"),
                   lazy(f"{publish}:run_rotate"), module="a2a"),
        CliCommand("agents wire", "point an A2A client (Hermes) at remote agents on this node",
                   lazy("anet_a2a.cli:configure_wire"), lazy("anet_a2a.cli:run_wire"),
                   description="Write a2a_agents entries into Hermes's config.yaml that point "
                               f"at http://<a2a_addr>{AGENTS_PATH}/<aid> with the local "
                               "token.", module="a2a"),
    ]


@hookimpl
def anet_key_rotated(paths: DataPaths, identity: Identity) -> list[KeyRotationStep]:
    def run(emergency: bool) -> str | None:
        from anet_a2a import cli
        from anet_a2a.state import StateDir, replace_token_after_emergency

        state = StateDir.of(paths)
        # The mark compares with the key history, so a token is replaced once per emergency.
        if not emergency or not replace_token_after_emergency(state, identity):
            return None
        refreshed = len(cli.refresh_wired(state)) if state.address_file.exists() else 0
        return (f"a2a: replaced {state.token_file} (the old token is refused from now on); "
                f"{refreshed} Hermes entr{'y' if refreshed == 1 else 'ies'} rewritten, other "
                "clients need the new token")

    return [KeyRotationStep(module=MODULE, run=run)]
