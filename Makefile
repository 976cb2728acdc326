# SkillClassics developer commands. `make run` and `make test` set everything up on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
# `run`, `test` and the other commands that use the stubs check them against protos/ first.
PROTO_SOURCES := $(shell find protos -mindepth 1 \( -name '*.proto' -o -type d \))
PROTOS_STAMP := $(VENV)/.protos-checked
# Backgammon's C legal-play generator, built in place (optional: without a compiler, pure Python is used).
NATIVE_STAMP := $(VENV)/.native-built
# The branch of this clone's git repository `make breaking` compares protos/ with.
BREAKING_AGAINST ?= main
# make test's worker processes (pytest-xdist; a test file's tests stay together on one worker). The tests
# mostly wait on the services they start, so two workers halve the time on a 2-core machine; 0 runs them
# in this process.
TEST_WORKERS ?= 2

.DEFAULT_GOAL := help
.PHONY: help setup protos check-protos breaking migrate run demo load test test-postgres fuzz chaos lint format bench clean

help: ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml libs/protos/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./libs/protos -e ".[dev]"
	@touch $(STAMP)

setup: $(STAMP) $(NATIVE_STAMP) ## create the virtual environment and install everything (done automatically)

$(NATIVE_STAMP): $(STAMP) setup.py libs/engines/backgammon/_native.c
	@$(PY) setup.py --quiet build_ext --inplace >/dev/null 2>&1 \
	  || echo "warning: backgammon's C generator was not built (no C compiler?): the pure-Python one is used"
	@touch $@

protos: $(STAMP) ## regenerate the Python and mypy stubs from protos/
	$(PY) -m tools.gen_protos
	@touch $(PROTOS_STAMP)

# When a .proto (or a folder of protos/: a file added or removed) is newer than the last check, compare the
# stubs with what the protos generate and regenerate them only if they differ. A fresh clone checks once
# and leaves its committed stubs untouched. (CI runs check-protos first, so committed drift still fails.)
$(PROTOS_STAMP): $(STAMP) $(NATIVE_STAMP) $(PROTO_SOURCES)
	@$(PY) -m tools.check_protos >/dev/null 2>&1 || { echo "protos/ changed: regenerating the stubs"; $(PY) -m tools.gen_protos; }
	@touch $@

check-protos: $(STAMP) ## fail if the committed stubs differ from what the protos generate
	$(PY) -m tools.check_protos

# For a feature branch: compares protos/ as it is in the working tree with protos/ on BREAKING_AGAINST.
breaking: $(STAMP) ## buf breaking: fail if protos/ breaks the contracts on main (BREAKING_AGAINST=branch)
	cd protos && $(abspath $(BIN))/buf breaking --against '../.git#branch=$(BREAKING_AGAINST),subdir=protos'

migrate: $(STAMP) ## migrate every service's database (SERVICE=fairness: one; DATA_DIR, DATABASE_URL)
	$(PY) -m libs.persistence.migrate $(SERVICE)

# Scale-out on one machine (README.md, docs/scaling.md): SHARDS (processes per rules family: 2, or
# chess=2,gin=3), GATEWAYS, CLOCK_SHARDS, MATCHMAKERS (default 1 each); more than one shard or matchmaking
# replica needs DATABASE_URL to name PostgreSQL, e.g. SHARDS=2 GATEWAYS=2 DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1/sc make run.
run: $(PROTOS_STAMP) ## start the whole stack on localhost with SQLite (Ctrl-C stops it)
	$(PY) -m libs.launcher

# Needs `make run` in another terminal. Overrides: GATEWAY_ADDRESS, FAIRNESS_ADDRESS, DEMO_FAMILIES
# (every family), DEMO_MAX_PLIES (300), DEMO_MINUTES, DATA_DIR (where the stack keeps its token key).
demo: $(PROTOS_STAMP) ## two bots (random vs greedy) play each family through the running stack's gateway
	$(PY) -m clients.demo

# Needs `make run` in another terminal, started with raised per-player limits for load:
# GATEWAY_CALL_RATE=100000 GATEWAY_CALL_BURST=100000 make run. LOAD_ARGS passes options (docs/load-testing.md).
load: $(PROTOS_STAMP) ## drive the running stack like real players and print the figures (LOAD_ARGS="--families chess=20,gin=10")
	$(BIN)/skillclassics load $(LOAD_ARGS)

test: $(PROTOS_STAMP) ## run the test suite but the long runs (PostgreSQL tests skip, saying so, when no server is reachable)
	$(PY) -m pytest -m "not long" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The long runs (chaos, the benchmarks run small, several matchmaking replicas and rules shards failed over
# on PostgreSQL): marked `long`, kept out of make test's 15-minute budget; CI runs them after it.
test-long: $(PROTOS_STAMP) ## run the long tests (marked long): chaos, benchmarks run small, scale-out and replica failover
	$(PY) -m pytest -m long $(PYTEST_ARGS)

# The tests marked postgres (data layer, services and full stacks on PostgreSQL); here they may not skip.
test-postgres: $(PROTOS_STAMP) ## run only the PostgreSQL tests, failing if TEST_POSTGRES_URL's server is unreachable
	REQUIRE_POSTGRES=1 $(PY) -m pytest -m postgres $(PYTEST_ARGS)

# A stack of its own on a private PostgreSQL server (tools/pgcluster.py), removed afterwards (docs/chaos.md).
# CHAOS_SEED (printed; repeats a schedule), CHAOS_SECONDS (300), CHAOS_MATCHES (3 at once per family),
# CHAOS_KILL_RATE (6 faults/min), CHAOS_FAMILIES (chess,gin), CHAOS_JSON (write the figures there).
chaos: $(PROTOS_STAMP) ## kill and restart services and the database under live matches, then check every promise
	$(PY) -m tools.chaos

# The fuzz suite (tests/fuzz, docs/fuzzing.md) runs with `make test` too, with few examples and the same
# ones every run. This runs it longer: FUZZ_EXAMPLES examples per test, fresh random ones (FUZZ_RANDOM=1;
# a failure is saved in .hypothesis/ and replayed first next time).
FUZZ_EXAMPLES ?= 300
FUZZ_RANDOM ?= 1
fuzz: $(PROTOS_STAMP) ## fuzz every RPC and the families' action parsers longer (FUZZ_EXAMPLES=300 per test)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_RANDOM=$(FUZZ_RANDOM) $(PY) -m pytest tests/fuzz -o timeout=0 $(PYTEST_ARGS)

lint: $(STAMP) ## ruff, mypy, import layering and buf lint
	$(BIN)/ruff check --no-cache .
	$(BIN)/ruff format --no-cache --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	cd protos && $(abspath $(BIN))/buf lint

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(PROTOS_STAMP) ## print the benchmark figures
	$(PY) -m benchmarks

clean: ## remove the virtual environment and local data
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
