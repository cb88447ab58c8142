# Two commands on a fresh machine:  make run   (set up + main job)   and   make test   (set up + CPU tests)
# While developing: make test-fast (the fast tier, ~2 min) and make lint (docs/contributing.md).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup lock run serve screenshot demo test test-fast test-rest lint validate chromium gpu-check clean

# `make setup` installs requirements/dev.lock (every package pinned: what CI runs) and robocache itself (editable)
# with uv when it can: uv from PATH, else uv from PyPI into the venv (its version pinned in the lock); with pip
# when uv cannot be had, or with UV=0. uv does not read pip's configuration, so the find-links pip is configured
# with (PIP_FIND_LINKS, `pip config`: where a machine keeps local wheels, such as the CPU build of torch the lock
# pins) are passed to it. docs/install.md has the measured times.
LOCK ?= requirements/dev.lock
UV ?= 1
# the uv `make lock` runs: the one on PATH (what setup used when there was one), else the venv's
UV_BIN = $(shell command -v uv 2>/dev/null || echo $(BIN)/uv)

$(BIN)/.installed: pyproject.toml $(LOCK)
	$(PY) -m venv $(VENV)
	@links="$${PIP_FIND_LINKS:-$$($(BIN)/python -m pip config get global.find-links 2>/dev/null)}"; \
	uv=""; if [ "$(UV)" != 0 ]; then \
	  if command -v uv >/dev/null 2>&1; then uv=uv; \
	  elif $(BIN)/python -m pip install -q "$$(grep -m1 '^uv==' $(LOCK))"; then uv=$(BIN)/uv; \
	  else echo "*** uv could not be installed: installing with pip (slower)"; fi; fi; \
	if [ -n "$$uv" ]; then \
	  echo "Installing $(LOCK) and robocache (editable) with $$($$uv --version) ..."; \
	  $$uv pip install -q --python $(BIN)/python $$(for d in $$links; do printf -- '--find-links %s ' "$$d"; done) \
	    -r $(LOCK) -e .; \
	else \
	  echo "Installing $(LOCK) and robocache (editable) with pip ..."; \
	  $(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -r $(LOCK) -e .; \
	fi
	touch $@

setup: $(BIN)/.installed  ## create .venv: requirements/dev.lock and robocache (editable), with uv (UV=0: pip)

# Re-resolve requirements/dev.lock from pyproject.toml (Python 3.11, Linux x86_64), keeping the pins it has unless
# UPGRADE=--upgrade. Its torch is the CPU build (torch==X+cpu): the machine needs that wheel (local find-links, as
# pip is configured here, or PyTorch's CPU wheel index). Then requirements/cu13.lock (a GPU machine: the cu13 and
# bench extras, Python 3.12) with every package the two share at dev.lock's version (torch's CUDA 13 build).
lock: setup  ## re-resolve requirements/dev.lock and cu13.lock with uv (UPGRADE=--upgrade to move every pin)
	links="$${PIP_FIND_LINKS:-$$($(BIN)/python -m pip config get global.find-links 2>/dev/null)}"; \
	$(UV_BIN) pip compile pyproject.toml --extra dev --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  $$(for d in $$links; do printf -- '--find-links %s ' "$$d"; done) $(UPGRADE) \
	  --custom-compile-command "make lock" -o $(LOCK)
	sed -n 's/+cpu//; /==/p' $(LOCK) > $(VENV)/dev-pins.txt
	$(UV_BIN) pip compile pyproject.toml --extra cu13 --extra bench --python-version 3.12 \
	  --python-platform x86_64-manylinux_2_28 -c $(VENV)/dev-pins.txt --no-annotate \
	  --custom-compile-command "make lock" -o requirements/cu13.lock

RUN_OUT ?= results/local
# `make run SERVE=0` stops after the headline table (scripted runs); PORT picks the dashboard's port; RUN_ARGS adds
# options of `robocache-bench run` (tests/test_newcomer.py: --time-limit 0.2, the path without the full sampling).
SERVE ?= 1
RUN_ARGS ?=
PORT ?= 8501
# The dashboard over results/ (the committed records) plus RUN_OUT: the loader adds a folder given with
# --results to results/, and lists a folder inside results/ (the default results/local) once. Loopback only.
SERVE_CMD = $(BIN)/streamlit run dashboard/app.py --server.address 127.0.0.1 --server.port $(PORT) \
	--server.headless true --browser.gatherUsageStats false -- --results $(RUN_OUT)
SERVE_MSG = echo '$(SERVE_CMD)'; echo; \
	echo "Dashboard: http://127.0.0.1:$(PORT)  (results/ + $(RUN_OUT); Ctrl-C to stop)"; echo

run: setup  ## the quick suite on the best device present (GPU, else CPU providers), its headline table, then the dashboard
	$(BIN)/robocache-bench run --suite quick --out $(RUN_OUT) $(RUN_ARGS); rc=$$?; \
	$(BIN)/robocache-bench report $(RUN_OUT) --headline; \
	if [ "$(SERVE)" = 0 ]; then exit $$rc; fi; \
	[ $$rc = 0 ] || echo "(some cases failed: exit code $$rc; the dashboard's Runs page lists them)"; \
	$(SERVE_MSG); exec $(SERVE_CMD)

serve: setup  ## the dashboard alone on http://127.0.0.1:$(PORT) over results/ and $(RUN_OUT)
	@$(SERVE_MSG); exec $(SERVE_CMD)

# The README's picture: the Overview (the morning page) over the committed records (results/ without results/local),
# in Debian's Chromium.
screenshot: setup chromium  ## docs/dashboard-overview.png, taken by the browser test's machinery
	$(BIN)/python -m dashboard.browser docs/dashboard-overview.png --charts 2 \
	  -- --no-default-results --results $(filter-out results/local/,$(wildcard results/*/))

demo: setup  ## resample, fuse and voxelize once on the best device present and print the results
	$(BIN)/python -m robocache.demo

# Debian's Chromium for the dashboard's browser test (tests/test_browser.py); Playwright drives it, nothing is
# downloaded by Playwright itself. Installed with apt-get as root, or with sudo when that needs no password;
# otherwise a message says how, and the browser test skips with the reason.
CHROMIUM ?= /usr/bin/chromium

chromium:  ## install Debian's chromium (apt-get) for the browser test, if missing
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo"; \
	else echo "*** $(CHROMIUM) is missing and apt-get needs root: run 'sudo apt-get install chromium fonts-liberation'."; \
	     echo "*** Until then the dashboard's browser test (tests/test_browser.py) is skipped."; exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then \
	  echo "*** $(CHROMIUM) is missing and there is no apt-get here: the browser test cannot run (skipped; in CI: failed)."; exit 0; fi; \
	echo "Installing Debian's chromium for the dashboard's browser test (apt-get) ..."; \
	export DEBIAN_FRONTEND=noninteractive; \
	{ $$sudo apt-get update -qq && \
	  $$sudo apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null; } || \
	  echo "*** apt-get could not install chromium: the browser test cannot run (skipped; in CI: failed)."; \
	if [ -x "$(CHROMIUM)" ]; then "$(CHROMIUM)" --version 2>/dev/null; \
	else echo "*** $(CHROMIUM) still missing after apt-get: the browser test cannot run (skipped; in CI: failed)."; fi

# Test tiers (docs/contributing.md): tests/conftest.py marks every test that needs a GPU, drives a browser,
# starts processes or was measured slow; the fast tier is the rest. PYTEST_ARGS adds options (-x, -k ...).
TIER_REST = slow or browser or gpu or multiprocess
PYTEST = $(BIN)/python -m pytest -q tests benchmarks --benchmark-disable $(XDIST) $(PYTEST_ARGS)
# both cores: the expensive tier waits on child processes, timeouts and a browser much of its time; --dist
# loadfile keeps each module on one worker, so a module's shared set-up (one server, one launch) is made once
XDIST ?= -n 2 --dist loadfile
# Bytecode cached under the venv for the tests and every process they start (torchrun and its ranks, the CLIs,
# Streamlit, pytest in pytest): where the environment sets PYTHONDONTWRITEBYTECODE (and uv installs no .pyc), each
# process compiled torch & co. from source again, `import torch` 4.5 CPU-s instead of 2.1 (docs/contributing.md,
# "Bytecode"). Nothing is written into the checkout; `make clean` removes it with the venv.
test-fast test-rest: export PYTHONPYCACHEPREFIX = $(abspath $(VENV))/pycache
test-fast test-rest: export PYTHONDONTWRITEBYTECODE =

lint: setup  ## ruff over the repository (the rules: pyproject.toml [tool.ruff])
	$(BIN)/ruff check .

validate: setup  ## the workflow files, offline: GitHub's schema (check-jsonschema) and zizmor's security audit
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(BIN)/zizmor --offline .github/workflows

test-fast: setup  ## the fast tier: every CPU test that starts no process, drives no browser and is not measured slow
	$(PYTEST) -m "not ($(TIER_REST))"

test-rest: setup chromium  ## asv check, then the rest: process groups, CLIs, the browser tests, the slow ones (GPU tests skip without a GPU); the 20 longest listed
	$(BIN)/asv check --python=same
	ROBOCACHE_CHROMIUM=$(CHROMIUM) $(PYTEST) -m "$(TIER_REST)" --durations=20

# What CI runs (.ci/run): make stops at the first target that fails, so a broken change fails in the fast tier.
test: setup chromium  ## everything, as CI runs it: lint, the workflow files, the fast tier, then the rest
	@$(MAKE) --no-print-directory -j1 lint validate test-fast test-rest

gpu-check:  ## on a GPU machine: GPU tests into OUT=<folder> (uses the machine's own python3)
	bash scripts/gpu_check.sh $${OUT:-gpu-out}

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
