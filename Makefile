# Rollout Lab: the README's commands. Each installs what it needs into .venv first.
#   make demo    install, then run the example training and print where its metrics are
#   make test    install, then lint and run every test
#   make bench   install the benchmark extras, then run every benchmark under bench/

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
export ROLLOUTLAB_CACHE ?= $(CURDIR)/.cache/rolloutlab

.PHONY: install demo test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned: the CPU build on this machine's disk, not a multi-GB CUDA download
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[cpu,dev]"
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[cpu,dev,bench]"
	touch $(BENCH_STAMP)

demo: install
	$(BIN)/python -m workers run examples/grpo-arith-quick.yaml --out runs/demo-$$(date +%Y%m%d-%H%M%S)

lint: install
	$(BIN)/ruff check workers tests bench
	$(BIN)/ruff format --check workers tests bench

test: lint
	$(BIN)/python -m pytest -q

bench: $(BENCH_STAMP)
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache
