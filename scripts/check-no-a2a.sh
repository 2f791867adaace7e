#!/usr/bin/env bash
# Install anet, anet-backends and anet-x402 without anet-a2a and anet-hub in a venv of their own,
# then check that both modules are reported as not installed and that the node's lifecycle still
# works (`anet hub` is then no command at all, as a Go build without the tag).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-no-a2a
data=$(mktemp -d)
trap 'ANET_DATA_DIR="$data" "$venv/bin/anet" stop >/dev/null 2>&1 || true; rm -rf "$data"' EXIT
test -x "$venv/bin/python" || "${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e . -e plugins/backends -e plugins/x402
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
assert {"backends", "x402"} <= installed, report["modules"]
PY
"$anet" init >/dev/null
"$anet" up >/dev/null
"$anet" status --json | "$venv/bin/python" -c 'import json,sys; s=json.load(sys.stdin); assert s["running"] and "a2a" not in s["modules"], s'
"$anet" stop >/dev/null
if "$anet" hub --help >/dev/null 2>&1; then echo "anet hub exists without the hub module" >&2; exit 1; fi
echo "no-a2a: 1 passed, 0 failed"
