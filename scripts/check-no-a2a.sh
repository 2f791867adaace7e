#!/usr/bin/env bash
# Install anet, anet-backends, anet-mcp and anet-x402 without anet-a2a and anet-hub in a venv of
# their own, then check that both modules are reported as not installed, that the node's
# lifecycle still works (`anet hub` is then no command at all, as a Go build without the tag) and
# that MCP does: the official MCP client calls a tool of a real `anet mcp`, started as the
# configuration it prints says.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-no-a2a
data=$(mktemp -d)
trap 'ANET_DATA_DIR="$data" "$venv/bin/anet" stop >/dev/null 2>&1 || true; rm -rf "$data"' EXIT
test -x "$venv/bin/python" || "${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e . -e plugins/backends -e plugins/mcp \
    -e plugins/x402
"$venv/bin/python" -m pip uninstall --quiet --yes anet-a2a anet-hub >/dev/null 2>&1 || true
export ANET_DATA_DIR="$data"
anet="$venv/bin/anet"
"$anet" doctor --json >"$data/doctor.json" || true
"$venv/bin/python" - "$data/doctor.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
installed = {module["name"] for module in report["modules"]["installed"]}
missing = {module["name"] for module in report["modules"]["notInstalled"]}
assert {"a2a", "hub"} <= missing and not {"a2a", "hub"} & installed, report["modules"]
assert {"backends", "mcp", "x402"} <= installed, report["modules"]
PY
"$anet" init >/dev/null
"$anet" up >/dev/null
"$anet" status --json | "$venv/bin/python" -c 'import json,sys; s=json.load(sys.stdin); assert s["running"] and "a2a" not in s["modules"], s'
"$anet" mcp --print-config >"$data/mcp.json"
"$venv/bin/python" - "$data/mcp.json" <<'PY'
import json, sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

entry = json.load(open(sys.argv[1]))["mcpServers"]["anet"]
server = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])

async def main():
    with anyio.fail_after(60):
        async with stdio_client(server) as streams, ClientSession(*streams) as session:
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert {"send_task", "reply_task", "list_inbox"} <= tools, tools
            status = await session.call_tool("node_status", {})
    assert not status.is_error, status.content
    modules = status.structured_content["modules"]
    assert status.structured_content["running"] and "mcp" in modules and "a2a" not in modules

anyio.run(main)
PY
"$anet" stop >/dev/null
if "$anet" hub --help >/dev/null 2>&1; then echo "anet hub exists without the hub module" >&2; exit 1; fi
echo "no-a2a: 1 passed, 0 failed"
