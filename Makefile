# bnnpred: `make run` (the main job) and `make test` each set up the virtualenv themselves.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BNNPRED := $(VENV)/bin/bnnpred
# The real data root; tests that need it skip when it is absent.
export BNNPRED_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: setup run test test-slow lint bench reproduce-quick reproduce-tables reproduce-full clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# the CPU build of torch from this machine's disk; a bare `torch` requirement could pull a CUDA build
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

# Two moons, MAP + full Laplace-GGN, δ by marginal likelihood, GLM / NN / MAP predictives; figures in runs/make-run
run: setup
	$(BNNPRED) train 'predictive.kinds=[map,nn,glm]' hydra.run.dir=runs/make-run
	@echo "figures and metrics: runs/make-run/"

# one worker per core (TEST_WORKERS=0: in this process), each test file on one worker so its fixtures are made once
TEST_WORKERS ?= auto
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile
test: setup
	$(PYTEST)

# the tests marked slow (a whole study or campaign script on the real data, minutes each), which `make test` skips
test-slow: setup
	BNNPRED_SLOW_TESTS=1 $(PYTEST) -m slow

lint: setup
	$(VENV)/bin/ruff check bnnpred tests bench

bench: setup
	$(PY) bench/laplace_full.py

# Every study (bnnpred/reproduce/) at smoke scale, into runs/reproduce-quick/ (about 20 min on 2 cores)
reproduce-quick: setup
	$(BNNPRED) reproduce --tier quick

# Every paper table and figure at CPU scale, in parallel; writes the committed pages under outputs/ (hours)
reproduce-tables: setup
	$(BNNPRED) reproduce --tier cpu

# The studies' GPU-scale presets (device=auto picks CUDA), into outputs/full/
reproduce-full: setup
	$(BNNPRED) reproduce --tier full

clean:
	rm -rf runs multirun
