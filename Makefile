# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DISTRIBUTIONS := -e . -e plugins/a2a -e plugins/x402 -e plugins/backends -e plugins/hub -e plugins/mcp
STAMP := $(VENV)/.installed

.PHONY: demo test test-no-a2a bench clean

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(DISTRIBUTIONS) -e ".[test,fast]"
	touch $(STAMP)

# The whole network on this machine, one task through it, then it waits for you until Ctrl-C.
# Unattended (CI): make demo DEMO_ARGS=--once
demo: $(STAMP)
	$(VENV)/bin/anet demo $(DEMO_ARGS)

test: $(STAMP)
	$(PY) -m pytest -q
	$(MAKE) test-no-a2a

# An install without the a2a extra must work like a Go build with -tags no_a2a.
test-no-a2a: $(STAMP)
	PYTHON=$(PYTHON) bash scripts/check-no-a2a.sh

# End-to-end figures in one run (about a minute); BENCH_ARGS=--nodes 1000 for the full hub count.
bench: $(STAMP)
	$(PY) bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-no-a2a
