# Two commands do all the set-up on a fresh machine:
#   make example   creates .venv, installs attnscore, verifies the specs and grades the example submissions
#   make test      creates .venv, installs attnscore, verifies the specs and runs the test suite
#   make test-fast the test suite without the tests marked slow (sandbox sweeps, LaTeX, Chromium):
#                  what a developer runs after each change (tests/README.md)
# TORCH picks the torch build: the default pins the CPU wheel; use TORCH=torch for your own (e.g. CUDA) build.

VENV  ?= .venv
TORCH ?= torch==2.13.0
PY    := $(VENV)/bin/python
BIN   := $(VENV)/bin

.PHONY: example test test-fast install lint docs-excerpts bench-suite

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

example: $(VENV)/.installed
	$(BIN)/attnscore verify
	$(BIN)/attnscore grade examples/submissions/scores --spec specs/dot_product_scores.yaml; test $$? -le 1
	$(BIN)/attnscore grade examples/submissions/score_matrix --spec specs/score_matrix.yaml; test $$? -le 1

# PYTEST_JOBS: pytest-xdist workers (default: one per core, at most 4); PYTEST_JOBS=0 runs in one process.
PYTEST_JOBS ?= auto
PYTEST := $(PY) -m pytest -q -n $(PYTEST_JOBS) --maxprocesses 4 --dist loadfile --no-loadscope-reorder

test: $(VENV)/.installed
	$(BIN)/attnscore verify
	$(BIN)/attnscore practice --verify --count 300
	$(PYTEST)

test-fast: $(VENV)/.installed
	$(PYTEST) -m "not slow"

# The figure of tests/README.md: the three parts of `make test` and its 20 slowest tests, with the load.
bench-suite: $(VENV)/.installed
	$(PY) benchmarks/bench_suite.py

lint: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev]'
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy attnscore

# The output excerpts of README.md and docs/*.md (blocks marked <!-- excerpt: NAME ... -->),
# rewritten from fresh runs; tests/test_excerpts.py fails when one has drifted.
docs-excerpts: $(VENV)/.installed
	$(PY) tests/excerpts.py
