# vvt: `make test` and `make demo` work from a fresh clone; they create .venv if missing.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: test demo install clean-venv

$(STAMP): setup.py requirements.txt requirements-test.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 -q tests $(PYTEST_ARGS)

# Synthetic motion data (written if missing) -> small divided-attention model on the CPU ->
# multi-view evaluation; prints the video-level top-1 and where the run's files are.
DEMO_DATA ?= data/synthetic
DEMO_DIR ?= runs/demo
DEMO_CONFIG ?= configs/synthetic.py:divided,data_dir=$(DEMO_DATA)
demo: $(STAMP)
	$(VENV)/bin/python -m vvt demo --config $(DEMO_CONFIG) \
	  --data_dir $(DEMO_DATA) --workdir $(DEMO_DIR)

clean-venv:
	rm -rf $(VENV)
