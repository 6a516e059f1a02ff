# tbx: two commands set everything up on a machine with Docker:
#   make bench   -- build what is missing, evaluate on the embedded demo pack, write the report
#   make test    -- build what is missing and run the whole test suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATASET ?= bench/packs/demo
TB_DATASET ?= ../shared/benchmarks/thinkingbox-bench-v1
CONCURRENCY ?= 2
K ?= 5
RESULTS ?= results
CONFIG ?=
AGENT ?= llm
export TESTCONTAINERS_RYUK_DISABLED := true

.PHONY: setup venv images bench test unit integration testdb gc lint conformance clean openenv-client openenv10-client

# Without CONFIG: the built-in agents `oracle` and `chaos` on the demo pack.
# With CONFIG=models.yaml (and DATASET=...): that model, k=K.
bench: venv images
ifeq ($(CONFIG),)
	$(BIN)/tbx run --dataset $(DATASET) --agent oracle --repeat $(K) --concurrency $(CONCURRENCY) --skip-rubrics --restart-on-change --out $(RESULTS)/demo-oracle --name oracle
	$(BIN)/tbx run --dataset $(DATASET) --agent chaos --repeat $(K) --concurrency $(CONCURRENCY) --skip-rubrics --restart-on-change --out $(RESULTS)/demo-chaos --name chaos
	$(BIN)/tbx report $(RESULTS)/demo-oracle $(RESULTS)/demo-chaos --out $(RESULTS)/demo-report
	$(BIN)/tbx view $(RESULTS)/demo-oracle $(RESULTS)/demo-chaos --out $(RESULTS)/demo-report
	@echo "report: $(RESULTS)/demo-report/report.html (and report.md); tasks and attempts: $(RESULTS)/demo-report/view/index.html"
else
	$(BIN)/tbx run --dataset $(DATASET) --agent $(AGENT) --config $(CONFIG) --repeat $(K) --concurrency $(CONCURRENCY) --out $(RESULTS)/$(notdir $(basename $(CONFIG)))
	$(BIN)/tbx report $(RESULTS)/$(notdir $(basename $(CONFIG)))
endif

setup: venv images

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,ray,inspect]'
	touch $@

images: venv
	$(BIN)/tbx images build

# openenv-core (the OpenEnv client the env-server tests drive tbx with) in a venv of
# its own: it pulls gradio, fastmcp and huggingface_hub, which tbx itself does not need.
OPENENV_VENV := .venv-openenv
openenv-client: $(OPENENV_VENV)/.installed

$(OPENENV_VENV)/.installed: constraints.txt
	$(PY) -m venv $(OPENENV_VENV)
	$(OPENENV_VENV)/bin/pip install -q --upgrade pip
	$(OPENENV_VENV)/bin/pip install -q -c constraints.txt 'openenv-core==0.3.0'
	touch $@

# openenv 0.10 (the current OpenEnv package; its generic and MCP clients drive the env-server
# tests) in a third venv: it needs fastmcp 3 / mcp 1.x, which tbx's mcp 2 excludes, so it is
# pinned here and not in constraints.txt.
OPENENV10_VENV := .venv-openenv10
openenv10-client: $(OPENENV10_VENV)/.installed

$(OPENENV10_VENV)/.installed:
	$(PY) -m venv $(OPENENV10_VENV)
	$(OPENENV10_VENV)/bin/pip install -q --upgrade pip
	$(OPENENV10_VENV)/bin/pip install -q 'openenv==0.10.0'
	touch $@

testdb:
	bash scripts/test-postgres.sh start

# pytest exits 5 when it collected nothing: that must fail, never pass silently.
# --maxfail: a broken machine (daemon gone, disk full) fails every test after it, each
# after its own timeout; stopping at 25 prints the reasons (-rfE) inside CI's time limit.
test: venv images testdb openenv-client openenv10-client
	$(BIN)/python -m pytest -q -rfEs --maxfail=25 -p no:cacheprovider; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

unit: venv testdb
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit

integration: venv images openenv-client openenv10-client
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/integration

conformance: venv images
	$(BIN)/tbx conformance --dataset $(TB_DATASET) --traces $(TB_DATASET)/traces --concurrency $(CONCURRENCY)

# Orphans only (owner exited or older than 6 h); `.venv/bin/tbx gc --all` removes live runs' sandboxes too.
gc: venv
	$(BIN)/tbx gc

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean: gc
	rm -rf $(VENV)
