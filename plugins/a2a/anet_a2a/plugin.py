"""Hook implementations of the module a2a."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from anet_a2a import cli, control, doctor
from anet_a2a.server import local_a2a
from anet_a2a.state import MODULE
from anet_core.api import (
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DoctorCheck,
    Lifespan,
    Node,
    hookimpl,
)


class A2AConfig(BaseModel):
    """``modules.a2a``: the interface needs no configuration; ``anet init`` writes no block."""

    model_config = ConfigDict(extra="forbid")


@hookimpl
def anet_config_blocks() -> list[ConfigBlock]:
    return [ConfigBlock(module=MODULE, model=A2AConfig)]


@hookimpl
def anet_lifespan(node: Node) -> list[Lifespan]:
    return [Lifespan(name="a2a-endpoint", open=lambda: local_a2a(node), module="a2a")]


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    return [control.control_routes()]


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [
        DoctorCheck("a2a-interface", MODULE, "the local A2A interface is up on its recorded "
                    "address, with no port conflict", doctor.interface_state),
        DoctorCheck("a2a-token", MODULE, "a2a_token.txt exists and only you can read it",
                    doctor.token_mode),
    ]


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [
        CliCommand("a2a rotate-token", "replace a2a_token.txt (refreshes the Hermes entries "
                   "anet wrote)", lambda parser: None, cli.run_rotate, module="a2a"),
        CliCommand("agents wire", "point an A2A client (Hermes) at remote agents on this node",
                   cli.configure_wire, cli.run_wire,
                   description="Write a2a_agents entries into Hermes's config.yaml that point "
                               f"at http://<a2a_addr>{cli.AGENTS_PATH}/<aid> with the local "
                               "token.", module="a2a"),
    ]
