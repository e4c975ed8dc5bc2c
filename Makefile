# harness-gym: two commands on a fresh machine.
#   make demo   set up, then run the main job (evaluate agents across harnesses, print a report)
#   make test   set up, then run the test suite (the default, fast suites)
# Also: make test-slow (long training suites), make bench (benchmarks), make lint.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# torch is pinned: an unpinned torch pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0
EXTRAS := test

.PHONY: setup demo test test-slow bench lint system-deps clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[$(EXTRAS)]'
	touch $(STAMP)

demo: setup
	$(BIN)/harness-gym eval --env all --agent oracle --agent random --episodes 20 --seed 0 \
		--out runs/demo/episodes.jsonl

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 -q

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

bench: setup
	$(BIN)/python benchmarks/step_throughput.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis
