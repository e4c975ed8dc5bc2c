"""The language-model training paths on a GPU: SFT and GRPO steps through the package, in bf16.

    python scripts/gpu_check.py prepare [--out .gpu-check]     # here, with the package's venv
    bash scripts/gpu-check.sh                                   # on the CUDA machine
    python scripts/gpu_check.py run --device cpu --precision fp32 --layers 2   # a dry run here

``prepare`` saves what the GPU machine cannot fetch: the embedded model's tokenizer and chat
template (a few MB; the weights stay here). ``run`` builds a randomly initialised model of the
embedded model's shape (SmolLM2-135M: 30 layers, width 576, 9 heads, 3 key-value heads; no
download), saves it as a Hugging Face folder, and runs ``train_sft_lm`` and ``train_grpo_lm``
(the functions ``harness-gym train --algo sft-lm | grpo-lm`` call) for a few steps on
ClickButton under ``Json``. It prints, per stage, the device, the precision, the losses (each
must be finite), the seconds and tokens per second, and exits non-zero if a loss is not finite.
A random model's losses say the kernels ran, not that anything learns.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

#: SmolLM2-135M-Instruct's shape (the embedded model's config.json).
SHAPE = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}


def prepare(out: Path) -> None:
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.grpo_lm import load_tokenizer

    tokenizer = load_tokenizer(Path(embedded_model_path()))
    tokenizer.save_pretrained(str(out / "tokenizer"))
    print(f"saved the embedded model's tokenizer to {out / 'tokenizer'}")


def random_model(tokenizer_dir: Path, out: Path, layers: int, dtype: str) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    config = LlamaConfig(
        **{**SHAPE, "num_hidden_layers": layers},
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    millions = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"random model: {millions:.1f} M parameters, {layers} layers, to train in {dtype}")
    return out


def run(args: argparse.Namespace) -> int:
    import torch

    from harness_gym.core.presets import resolve_harness
    from harness_gym.train.grpo_lm import GRPOLMConfig, train_grpo_lm
    from harness_gym.train.lm_rollout import RolloutConfig
    from harness_gym.train.sft_lm import SFTLMConfig, train_sft_lm

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU machine, or pass --device cpu --precision fp32 for a dry run")
        return 2
    print(f"torch {torch.__version__}, device {device}, precision {args.precision}")
    work = Path(args.out)
    model_dir = random_model(Path(args.tokenizer), work / "random-model", args.layers, args.precision)
    harness = resolve_harness("Json")
    failed = False
    start = time.perf_counter()
    sft = train_sft_lm(
        SFTLMConfig(
            task="ClickButton",
            harnesses=[harness],
            train_seeds=list(range(10_000, 10_000 + 8 * args.steps)),
            model=str(model_dir),
            precision=args.precision,
            threads=args.threads,
        ),
        work / "sft",
        progress=False,
    )
    losses = [h["loss"] for h in sft.history if "loss" in h]
    failed |= not losses or not all(math.isfinite(v) for v in losses)
    seconds = time.perf_counter() - start
    t = sft.timings
    print(
        json.dumps(
            {
                "stage": "sft",
                "losses": losses,
                "train_seconds": round(t["train_seconds"], 2),
                "tokens_per_second": round(t["tokens"] * 2 / max(t["train_seconds"], 1e-9), 1),  # 2 epochs
                "wall_seconds": round(seconds, 2),
            }
        )
    )
    start = time.perf_counter()
    grpo = train_grpo_lm(
        GRPOLMConfig(
            task="ClickButton",
            harnesses=[harness],
            train_seeds=list(range(20_000, 20_064)),
            model=str(work / "sft"),
            steps=args.steps,
            group_size=4,
            micro_batch_size=4,
            precision=args.precision,
            threads=args.threads,
            rollout=RolloutConfig(max_reply_tokens=24),
        ),
        work / "grpo",
        progress=False,
    )
    losses = [h["loss"] for h in grpo.history if "loss" in h]
    failed |= not losses or not all(math.isfinite(v) for v in losses)
    t = grpo.timings
    print(
        json.dumps(
            {
                "stage": "grpo",
                "losses": losses,
                "train_seconds": round(t["train_seconds"], 2),
                "seconds_per_step": round(t["train_seconds"] / args.steps, 2),
                "rollout_seconds": round(t["rollout_seconds"], 2),
                "wall_seconds": round(time.perf_counter() - start, 2),
            }
        )
    )
    print("FAILED: a loss is not finite" if failed else "ok: every loss is finite")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    prep = sub.add_parser("prepare", help="save the embedded model's tokenizer for the GPU machine")
    prep.add_argument("--out", default=".gpu-check")
    go = sub.add_parser("run", help="SFT and GRPO steps of a random model of the embedded shape")
    go.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    go.add_argument("--precision", choices=("bf16", "fp32", "auto"), default="bf16")
    go.add_argument("--tokenizer", default=".gpu-check/tokenizer")
    go.add_argument("--layers", type=int, default=SHAPE["num_hidden_layers"])
    go.add_argument("--steps", type=int, default=2)
    go.add_argument("--threads", type=int, default=2)
    go.add_argument("--out", default="/tmp/gpu-check")
    args = parser.parse_args(argv)
    if args.verb == "prepare":
        prepare(Path(args.out))
        return 0
    if not (Path(args.tokenizer) / "tokenizer_config.json").is_file():
        parser.error(f"--tokenizer {args.tokenizer}: none there; run: bash scripts/gpu-check.sh prepare")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
