#!/usr/bin/env bash
# The demo until `anet demo` exists: a node in a temporary data directory, started, shown, stopped.
set -euo pipefail
anet="${1:-.venv/bin/anet}"
export ANET_DATA_DIR="$(mktemp -d)/node"
trap '"$anet" stop >/dev/null 2>&1 || true; rm -rf "$(dirname "$ANET_DATA_DIR")"' EXIT
echo "== anet init";   "$anet" init
echo "== anet up";     "$anet" up
echo "== anet status"; "$anet" status
echo "== anet doctor"; "$anet" doctor || true
echo "== anet stop";   "$anet" stop
