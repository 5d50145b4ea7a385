# Two entry points for a fresh machine with Python 3.11.10+, 3.12.5+ or 3.13+: `make demo` and `make test`.
# Both create .venv and install oncebeat from this repository (pyproject.toml) on first use, with the first
# interpreter that meets the floor (scripts/find-python: $$PYTHON, python3, python3.X, pyenv's versions).
PYTHON ?= $(shell scripts/find-python)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint install clean translations

$(BIN)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "make: no suitable Python (see the message above)" >&2; exit 1; }
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

# Re-extract the reminder emails' messages and merge them into each catalog. Run again on unchanged sources it
# changes no byte: no header or dates in the template, the catalogs' POT-Creation-Date kept, the same line widths.
LOCALE := src/oncebeat/reminders/locale
translations: $(BIN)/.installed
	$(BIN)/pybabel --quiet extract -F babel.cfg -o $(LOCALE)/oncebeat.pot --no-location --omit-header .
	$(BIN)/pybabel --quiet update -i $(LOCALE)/oncebeat.pot -d $(LOCALE) -D oncebeat --ignore-pot-creation-date -w 100

clean:
	rm -rf $(VENV) oncebeat-demo .pytest_cache
