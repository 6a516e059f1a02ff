# tbx: two commands set everything up on a machine with Docker:
#   make bench   -- evaluate on the embedded default (arrives with the bench issue)
#   make test    -- build what is missing and run the whole test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATASET ?= ../shared/benchmarks/thinkingbox-bench-v1
CONCURRENCY ?= 2
export TESTCONTAINERS_RYUK_DISABLED := true

.PHONY: setup venv images test unit integration testdb gc lint conformance clean

setup: venv images

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

images: venv
	$(BIN)/tbx images build

testdb:
	bash scripts/test-postgres.sh start

# pytest exits 5 when it collected nothing: that must fail, never pass silently.
test: venv images testdb
	$(BIN)/python -m pytest -q -p no:cacheprovider; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

unit: venv testdb
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit

integration: venv images
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/integration

conformance: venv images
	$(BIN)/tbx conformance --dataset $(DATASET) --traces $(DATASET)/traces --concurrency $(CONCURRENCY)

gc: venv
	$(BIN)/tbx gc

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean: gc
	rm -rf $(VENV)
