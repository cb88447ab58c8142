# Two commands on a fresh machine:  make run   (set up + main job)   and   make test   (set up + CPU tests)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup run test gpu-check clean

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

setup: $(BIN)/.installed  ## create .venv and install robocache with its [dev] extra

run: setup  ## resample, fuse and voxelize on the best device present and print the results
	$(BIN)/python -m robocache.demo

test: setup  ## the whole CPU test suite (GPU tests skip, with a banner, without a GPU)
	$(BIN)/python -m pytest -q

gpu-check:  ## on a GPU machine: GPU tests into OUT=<folder> (uses the machine's own python3)
	bash scripts/gpu_check.sh $${OUT:-gpu-out}

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
