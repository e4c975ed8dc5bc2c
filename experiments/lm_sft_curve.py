"""How many demonstrations does the embedded model need? SFT loss by step, then held-out success.

    .venv/bin/python experiments/lm_sft_curve.py [--learning-rate 5e-4] [--max-minutes 60]
        [--demonstrations 2400] [--eval-seeds 100] [--out runs/sft-curve]

The question ``lm_field_order.py`` asks (does a model post-trained through one harness fail
under another?) needs a model that succeeds under its training harness first. This script
measures how far supervised fine-tuning gets there on CPU: SmolLM2-135M-Instruct (the
embedded model) on ClickButton demonstrations under the experiment's training harness (the
canonical harness, no worked examples, one attempt), one pass over fresh demonstrations,
stopped after ``--max-minutes`` of training. It prints the loss and token accuracy of every
optimizer step and the mean over windows of 20 steps, saves the last step's model, and
evaluates it greedily on held-out seeds under the training harness and with the field order
reversed, paired by seed (exact McNemar, Newcombe interval).

Reading the loss: a reply is about 17 tokens, and all but the clicked ref are format. A model
that knows the format and picks a ref at random among the page's ~7 elements has a loss near
ln(7) / 17 = 0.11 per token and a token accuracy near 16/17 = 0.94; a model that finds the
named button has a loss near 0.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lm_field_order import (  # noqa: E402
    MAX_REPLY_TOKENS,
    PAIRED_HEADER,
    TASK,
    TRAIN_SEED_START,
    harness_of,
    paired_line,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument(
        "--lr-scheduler",
        default="constant_with_warmup",
        choices=("linear", "constant", "constant_with_warmup", "cosine"),  # sft_lm.LR_SCHEDULERS
    )
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--demonstrations", type=int, default=2400, help="one pass over this many")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-minutes", type=float, default=60.0, help="stop training after this long")
    parser.add_argument("--eval-seeds", type=int, default=100, help="held-out seeds 0..N-1")
    parser.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="runs/sft-curve")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from transformers import TrainerCallback

    from harness_gym.train.lm_eval import evaluate_folder
    from harness_gym.train.sft_lm import SFTLMConfig, train_sft_lm

    config = SFTLMConfig(
        task=TASK,
        harnesses=[harness_of({})],
        train_seeds=list(range(TRAIN_SEED_START, TRAIN_SEED_START + args.demonstrations)),
        epochs=1,
        batch_size=args.batch_size,
        micro_batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        lr_scheduler=args.lr_scheduler,
        warmup_steps=args.warmup_steps,
        precision=args.precision,
        threads=args.threads,
    )
    started = time.perf_counter()
    deadline = args.max_minutes * 60

    class StopAfter(TrainerCallback):
        """Ends training after ``--max-minutes`` (the model of the last step is saved)."""

        def on_train_begin(self, *_: object, **__: object) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, _args: object, state: object, control: object, **_: object) -> None:
            seconds = time.perf_counter() - self.start
            if state.global_step % 10 == 0:  # type: ignore[attr-defined]
                print(f"step {state.global_step}: {seconds:.0f} s", flush=True)  # type: ignore[attr-defined]
            if seconds > deadline:
                control.should_training_stop = True  # type: ignore[attr-defined]

    out = Path(args.out)
    trained = train_sft_lm(config, out / "model", progress=False, callbacks=[StopAfter()])
    history = trained.history
    print(f"trained {len(history)} steps ({len(history) * args.batch_size} demonstrations) in "
          f"{trained.timings['train_seconds']:.0f} s")  # fmt: skip
    for start in range(0, len(history), 20):
        window = history[start : start + 20]
        loss = sum(h["loss"] for h in window) / len(window)
        accuracy = sum(h.get("mean_token_accuracy", math.nan) for h in window) / len(window)
        steps = f"{window[0]['step']}-{window[-1]['step']}"
        print(f"  steps {steps}: loss {loss:.3f}, token accuracy {accuracy:.3f}")
    seeds = range(args.eval_seeds)
    canonical = evaluate_folder(trained.path, TASK, harness_of({}), seeds, args.threads, MAX_REPLY_TOKENS)
    reversed_ = evaluate_folder(
        trained.path, TASK, harness_of({"field_order": "reversed"}), seeds, args.threads, MAX_REPLY_TOKENS
    )
    print(f"canonical (trained): {canonical}")
    print(f"field order reversed: {reversed_}")
    print("\n".join([*PAIRED_HEADER, paired_line("canonical vs reversed", canonical, reversed_)]))
    summary = {
        "config": config.to_dict(),
        "steps": len(history),
        "train_seconds": trained.timings["train_seconds"],
        "history": history,
        "canonical": [canonical.successes, canonical.episodes],
        "reversed": [reversed_.successes, reversed_.episodes],
        "minutes": (time.perf_counter() - started) / 60,
    }
    (out / "curve.json").write_text(json.dumps(summary, indent=1, default=str), "utf-8")
    print(f"wrote {out / 'curve.json'} ({summary['minutes']:.1f} min)")


if __name__ == "__main__":
    main()
