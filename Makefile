# Two entry points (see README): `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
ARGS ?=
PYTEST_ARGS ?=

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

.PHONY: demo test engine lint
demo: $(VENV)/.installed
	$(VENV)/bin/python run_bench.py demo $(ARGS)

# The engine environment, with progress on first use (cached; a no-op afterwards).
engine: $(VENV)/.installed
	$(VENV)/bin/python run_bench.py engine provision

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

# The engines the tests need are provisioned in the background while the tests without the
# engine run (tests/conftest.py).
test: lint
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)
