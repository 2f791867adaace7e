# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DISTRIBUTIONS := -e . -e plugins/a2a -e plugins/x402 -e plugins/backends
STAMP := $(VENV)/.installed

.PHONY: demo test test-no-a2a bench clean

$(STAMP): pyproject.toml plugins/a2a/pyproject.toml plugins/x402/pyproject.toml plugins/backends/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(DISTRIBUTIONS) -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	bash scripts/demo-node.sh $(VENV)/bin/anet

test: $(STAMP)
	$(PY) -m pytest -q
	$(MAKE) test-no-a2a

# An install without the a2a extra must work like a Go build with -tags no_a2a.
test-no-a2a: $(STAMP)
	PYTHON=$(PYTHON) bash scripts/check-no-a2a.sh

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .venv-no-a2a
