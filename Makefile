# Two entry points for a fresh machine with Python 3.11+: `make demo` and `make test`.
# Both create .venv and install oncebeat from this repository (pyproject.toml) on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/oncebeat demo

test: $(BIN)/.installed
	$(BIN)/python -m pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check src
	$(BIN)/mypy

clean:
	rm -rf $(VENV) oncebeat-demo .pytest_cache
