# Two entry points for a fresh machine with Python 3.11.10+, 3.12.5+ or 3.13+: `make demo` and `make test`.
# Both create .venv and install oncebeat from this repository (pyproject.toml) on first use, with the first
# interpreter that meets the floor (scripts/find-python: $$PYTHON, python3, python3.X, pyenv's versions).
PYTHON ?= $(shell scripts/find-python)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-quick test-durations lint install clean translations

$(BIN)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "make: no suitable Python (see the message above)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/oncebeat demo

# The suite runs in parallel test processes (pytest-xdist): two per core, because most tests wait on a
# subprocess, a lease, an SMTP stall or the database rather than on the CPU; an idle process takes queued tests
# from a busy one (worksteal). TEST_PROCS=0 runs every test in one process, in file order.
TEST_PROCS ?= $(shell n=$$(nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2); echo $$((n * 2)))
# The test processes, and the hundreds of oncebeat processes they start, keep compiled bytecode (pytest's rewritten
# test modules too) in $(VENV)/pycache, never beside the sources, even where PYTHONDONTWRITEBYTECODE is set:
# without it every process compiles every module it imports again (0.3 s of CPU per `oncebeat` process).
PYCACHE := $(abspath $(VENV))/pycache
# Test databases, Maildirs and other temporary files go to a memory file system when the machine has one (TMPDIR for
# the test processes and everything they start; pytest's tmp_path lives under it): every SQLite COMMIT fsyncs its WAL
# (synchronous=FULL, the default the tests keep), and on a disk those flushes were a third of a SQLite simulation's
# wall time and a quarter of its CPU (docs/benchmarks.md, "Round 3d"). No test crashes the host, so none depends on
# the flush reaching a disk. TEST_TMPDIR= (empty) keeps the system's temporary folder.
TEST_TMPDIR ?= $(shell test -d /dev/shm && test -w /dev/shm && echo /dev/shm)
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) PYTHONPYCACHEPREFIX=$(PYCACHE) \
	$(BIN)/python -m pytest -n $(TEST_PROCS) --dist worksteal

test: $(BIN)/.installed
	$(PYTEST)

# Each process of `make test` starts its share of the tests longest first (tests/worksteal_order.py), by the seconds
# each test took when tests/durations.txt was recorded; a test missing there counts as a median one. Record it again
# (the whole suite, once) when tests were added or became much slower or faster, and commit the file.
test-durations: $(BIN)/.installed
	$(PYTEST) --record-durations tests/durations.txt

# The unit tier only (tests/unit: no worker, clock or web processes; seconds, not minutes).
test-quick: $(BIN)/.installed
	$(PYTEST) tests/unit

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
