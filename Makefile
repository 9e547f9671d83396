# Two commands do all the set-up on a fresh machine:
#   make example   creates .venv, installs attnscore, verifies the specs and grades the example submissions
#   make test      creates .venv, installs attnscore, verifies the specs and runs the test suite
# TORCH picks the torch build: the default pins the CPU wheel; use TORCH=torch for your own (e.g. CUDA) build.

VENV  ?= .venv
TORCH ?= torch==2.13.0
PY    := $(VENV)/bin/python
BIN   := $(VENV)/bin

.PHONY: example test install lint docs-excerpts

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

test: $(VENV)/.installed
	$(BIN)/attnscore verify
	$(BIN)/attnscore practice --verify --count 300
	$(PY) -m pytest -q

lint: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev]'
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy attnscore

# The output excerpts of README.md and docs/*.md (blocks marked <!-- excerpt: NAME ... -->),
# rewritten from fresh runs; tests/test_excerpts.py fails when one has drifted.
docs-excerpts: $(VENV)/.installed
	$(PY) tests/excerpts.py
