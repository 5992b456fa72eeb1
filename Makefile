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

clean-venv:
	rm -rf $(VENV)
