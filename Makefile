# vvt: `make demo` and `make test` work from a fresh clone; they create .venv if missing. `make demo` installs what
# the demo needs (vvt and its runtime dependencies); `make test` adds the test extras (pytest, torch, transformers,
# libtpu, ruff).
PYTHON ?= python3
VENV := .venv
# What is installed: the test extras (STAMP), or vvt and its runtime dependencies only (DEMO_STAMP).
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
PYTEST_ARGS ?=
LINT_PATHS := vvt tests configs experiments benchmarks scripts
# The exact versions CI tests (pyproject.toml allows ranges; these files pin them).
CONSTRAINTS := -c requirements.txt -c requirements-test.txt

.PHONY: test test-under-load lint demo install install-test clean-venv

$(DEMO_STAMP): pyproject.toml requirements.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -c requirements.txt -e .
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml requirements.txt requirements-test.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q $(CONSTRAINTS) -e '.[test]'
	touch $(STAMP) $(DEMO_STAMP)

install: $(DEMO_STAMP)

install-test: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)

# --dist loadscope: all tests of a module on one worker, so a module's fixtures (tiny runs, converted models) and
# compiled programs are made once, not once per worker; --cpu-durations=N (tests/conftest.py) lists CPU time.
test: lint
	$(VENV)/bin/python -m pytest -n 2 --dist loadscope -q --durations=30 tests $(PYTEST_ARGS)

# `make test` with two busy loops beside it (started and ended by .ci/under_load, by pid): a busy machine.
test-under-load: $(STAMP)
	PYTHON=$(PYTHON) .ci/under_load $(MAKE) --no-print-directory test

# Synthetic motion data (written if missing) -> small divided-attention model on the CPU ->
# multi-view evaluation; prints the video-level top-1 and where the run's files are.
DEMO_DATA ?= data/synthetic
DEMO_DIR ?= runs/demo
DEMO_CONFIG ?= configs/synthetic.py:divided,data_dir=$(DEMO_DATA)
demo: $(DEMO_STAMP)
	$(VENV)/bin/python -m vvt demo --config $(DEMO_CONFIG) \
	  --data_dir $(DEMO_DATA) --workdir $(DEMO_DIR)

clean-venv:
	rm -rf $(VENV)
