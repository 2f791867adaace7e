"""The steps of ``anet demo`` and what it prints."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import signal
import sys
import textwrap
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from anet_core.cli.context import CliContext
from anet_core.demo.network import DemoNode, EmbeddedNetwork, text_agent_root
from anet_core.demo.progress import Progress
from anet_core.errors import AnetError
from anet_core.plugins import install_command
from anet_core.protocol.tasks import TaskMetadata

NEEDED_MODULES = ("a2a", "backends")
WRAP_WIDTH = 96
MAX_LINES = 6
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_demo(args: argparse.Namespace, ctx: CliContext) -> int:
    _check_modules(ctx)
    agent_root = text_agent_root()
    try:
        return asyncio.run(_demo(args, agent_root))
    except asyncio.CancelledError:
        print("Interrupted; everything the demo started was stopped.", file=sys.stderr)
        return 130


def _check_modules(ctx: CliContext) -> None:
    for module in NEEDED_MODULES:
        if module in ctx.plugins.modules:
            continue
        if module in ctx.plugins.disabled:
            raise AnetError("demo-module-disabled",
                            f"the demo needs the module {module}, which ANET_DISABLE_MODULES "
                            "leaves out", hint="run it without ANET_DISABLE_MODULES")
        raise AnetError("demo-module-missing", f"the demo needs the module {module}, which is "
                        "not installed", hint=f"install it with: {install_command(module)}")


async def _together(*steps: Coroutine[Any, Any, Any]) -> list[Any]:
    """Run steps concurrently; the first failure cancels the others and is raised as it is."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(step) for step in steps]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in tasks]


async def _demo(args: argparse.Namespace, agent_root: Path) -> int:
    progress = Progress()
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    stopping = False

    def on_signal() -> None:
        nonlocal stopping
        if not stopping:  # a second Ctrl-C must not cut the clean-up short
            stopping = True
            main.cancel()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal)
    try:
        progress.line("anet demo: a hub, the nodes alice (asks) and bob (serves, through the "
                      "example text agent), on loopback.")
        async with EmbeddedNetwork.open(agent_root=agent_root, keep=args.keep) as network:
            progress.line(f"Everything lives in {network.work} "
                          f"({'kept' if args.keep else 'removed'} on exit).\n")
            try:
                alice, bob = await _build(network, progress)
                task = await _round_trip(network, progress, alice, bob, args.text)
                _print_task(progress, task, args.text)
                if not args.once:
                    _print_try_it(progress, network, alice, bob)
                    return await _serve_until_stopped(network, progress)
                return 0
            except AnetError as error:
                if not args.keep and not error.hint:
                    error.hint = "`anet demo --keep` keeps the logs of every part for a look"
                raise
            finally:
                stopping = True
                progress.line()
                async with progress.step("stopping") as step:
                    names = _started(network)
                    await network.close()
                    step.result = (f"stopped {names}" if names else "nothing was running") \
                        + ("" if args.keep else f"; removed {network.work}")
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


def _started(network: EmbeddedNetwork) -> str:
    """"alice, bob, the text agent and the hub": what ran, nodes first."""
    names = sorted((child.name for child in network.children),
                   key=lambda name: (name.startswith("the "), name))
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


async def _build(network: EmbeddedNetwork, progress: Progress) -> tuple[DemoNode, DemoNode]:
    async def hub() -> None:
        async with progress.step("starting the hub") as step:
            url = await network.start_hub()
            step.result = f"hub listening on {url}"

    async def agent() -> None:
        async with progress.step("starting the example text agent") as step:
            url = await network.start_agent()
            step.result = f"example text agent listening on {url}"

    await _together(hub(), agent())
    alice = network.create_node("alice")
    bob = network.create_node("bob", serve_with_agent=True)

    async def start(node: DemoNode) -> None:
        async with progress.step(f"starting {node.name}") as step:
            await network.start_node(node)
            role = (f"local A2A endpoint {node.a2a.url}" if node is alice
                    else "backend: the text agent")
            step.result = f"{node.name} registered at the hub; {role}"

    await _together(start(alice), start(bob))
    progress.line(f"      alice's AID {alice.aid}")
    progress.line(f"      bob's AID   {bob.aid}")
    async with progress.step("trust") as step:
        await _together(network.trust(bob, alice), network.trust(alice, bob))
        step.result = "trust both ways: bob accepts alice's tasks, alice trusts bob"
    async with progress.step("directory") as step:
        entry = await network.listed(alice, bob.aid)
        step.result = (f"alice's endpoint lists bob: card {entry['verification']}, "
                       f"{entry.get('charge', 'free')}")
    return alice, bob


async def _round_trip(network: EmbeddedNetwork, progress: Progress, alice: DemoNode,
                      bob: DemoNode, text: str) -> dict[str, Any]:
    arrow = progress.arrow
    async with progress.step("round trip") as step:
        task = await network.send_text(alice, bob.aid, text)
        step.result = (f"round trip: alice's endpoint {arrow} hub {arrow} bob {arrow} text agent "
                       f"{arrow} back")
    state = task["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        reason = task.get("metadata", {}).get(TaskMetadata.REASON, "")
        raise AnetError("demo-task-not-completed",
                        f"the task ended {state.removeprefix('TASK_STATE_').lower()}"
                        + (f" ({reason})" if reason else ""),
                        detail=_reply_text(task), hint="run again with --keep and read the logs "
                        "in the directory it names (alice/logs, bob/logs, hub.log)")
    return task


def _reply_text(task: dict[str, Any]) -> str:
    """The reply: the artifact named "reply", else every text part of the artifacts."""
    artifacts = task.get("artifacts", [])
    chosen = [artifact for artifact in artifacts if artifact.get("name") == "reply"] or artifacts
    texts = [part["text"] for artifact in chosen for part in artifact.get("parts", [])
             if "text" in part]
    message = task.get("status", {}).get("message") or {}
    texts += [part["text"] for part in message.get("parts", []) if "text" in part]
    return "\n".join(texts)


def _print_task(progress: Progress, task: dict[str, Any], text: str) -> None:
    metadata = task.get("metadata", {})
    receipt = "verified" if metadata.get(TaskMetadata.RECEIPT_VERIFIED) else "not verified"
    progress.line(f"\nTask {task['id']}: completed, bob's signed receipt {receipt}.")
    progress.line(_labelled("alice asked:", text))
    progress.line(_labelled("bob replied:", _reply_text(task)))


def _labelled(label: str, text: str) -> str:
    indent = " " * (len(label) + 3)
    return "\n".join(textwrap.wrap(text, WRAP_WIDTH, initial_indent=f"  {label} ",
                                   subsequent_indent=indent, max_lines=MAX_LINES,
                                   placeholder=" …"))


def _shell_path(path: Path) -> str:
    """``path`` as the user would type it: relative when below the working directory."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _anet_command() -> str:
    """How to run this very anet: ``anet`` when it is the one on PATH, else its path."""
    mine = Path(sys.executable).parent / "anet"
    found = shutil.which("anet")
    if found and mine.exists() and Path(found).resolve() == mine.resolve():
        return "anet"
    if mine.exists():
        return _shell_path(mine)
    return f"{_shell_path(Path(sys.executable))} -m anet_core.cli.main"


def _print_try_it(progress: Progress, network: EmbeddedNetwork, alice: DemoNode,
                  bob: DemoNode) -> None:
    python = _shell_path(Path(sys.executable))
    assert network.agent_root is not None
    client = _shell_path(network.agent_root / "examples" / "client.py")
    anet = _anet_command()
    data_dir = shlex.quote(str(alice.paths.root))
    token_file = shlex.quote(str(alice.a2a.token_file))
    progress.line(f"""
The network stays up. In another terminal (bash or zsh), talk to bob through alice's local
A2A endpoint. The token is read from its file and passed on a file descriptor, never printed
and never an argument:

  export ANET_DATA_DIR={data_dir}
  TOKEN=$(cat {token_file})
  auth() {{ printf 'Authorization: Bearer %s\\n' "$TOKEN"; }}

  curl -s -H @<(auth) "{alice.a2a.agents_url}"
  curl -s -H @<(auth) -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \\
      "{alice.jsonrpc_urls[bob.aid]}" -d '{{
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {{"message": {{"role": "ROLE_USER", "messageId": "m-0001",
          "parts": [{{"text": "transform title: hello from curl"}}]}}}}}}'

The official a2a-sdk client and alice's own CLI, in the same terminal (they read ANET_DATA_DIR):

  {python} {client} --aid {bob.aid} --text "stats: Count these words." --stream
  {anet} send {bob.aid} "transform slug: Hello Agent Network" --wait
  {anet} tasks

Press Ctrl-C to stop everything.""")


async def _serve_until_stopped(network: EmbeddedNetwork, progress: Progress) -> int:
    """Until Ctrl-C (exit 0) or until a process of the network dies (exit 1)."""
    try:
        child = await network.first_exit()
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        return 0
    raise AnetError("demo-process-exited",
                    f"{child.name} exited with status {child.process.returncode}",
                    detail=child.log_tail())
