# Two commands on a fresh machine:  make run   (set up + main job)   and   make test   (set up + CPU tests)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup run demo test gpu-check clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

setup: $(BIN)/.installed  ## create .venv and install robocache with its [dev] extra

RUN_OUT ?= results/local

run: setup  ## the quick suite on the best device present (GPU, else CPU providers), then its headline table
	$(BIN)/robocache-bench run --suite quick --out $(RUN_OUT); rc=$$?; \
	$(BIN)/robocache-bench report $(RUN_OUT) --headline; exit $$rc

demo: setup  ## resample, fuse and voxelize once on the best device present and print the results
	$(BIN)/python -m robocache.demo

test: setup  ## the whole CPU test suite (GPU tests skip, with a banner, without a GPU), asv check, benchmarks as tests
	$(BIN)/asv check --python=same
	$(BIN)/python -m pytest -q tests benchmarks --benchmark-disable

gpu-check:  ## on a GPU machine: GPU tests into OUT=<folder> (uses the machine's own python3)
	bash scripts/gpu_check.sh $${OUT:-gpu-out}

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
