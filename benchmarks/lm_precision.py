"""fp32 against bf16 (autocast, fp32 master weights) for one training pass of the embedded model.

    .venv/bin/python benchmarks/lm_precision.py [--rows 2] [--repeats 3] [--threads 2]

One forward and backward pass over real SFT rows (oracle demonstrations of ClickButton under
the canonical harness, loss on the agent's tokens only), fp32 and bf16 interleaved so that load
on a shared machine falls on both alike. Prints seconds per pass side by side and their ratio,
and how far bf16's results are from fp32's: the loss, and the cosine between the two gradients.
``--precision auto`` in training picks bf16 only where :func:`harness_gym.train.precision.bf16_supported`.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    from harness_gym.core.harness import Harness
    from harness_gym.llm.embedded import embedded_model_path
    from harness_gym.train.grpo_lm import load_tokenizer
    from harness_gym.train.precision import bf16_supported
    from harness_gym.train.sft_lm import demonstration_rows, sft_tokens

    torch.set_num_threads(args.threads)
    path = embedded_model_path()
    tokenizer = load_tokenizer(path)
    rows = demonstration_rows(
        "ClickButton", [Harness(step_budget=1)], list(range(10_000, 10_000 + args.rows))
    )
    tokens = [sft_tokens(tokenizer, r["messages"], None, r["trained_from"]) for r in rows]
    width = max(len(t["input_ids"]) for t in tokens)
    ids = torch.full((len(tokens), width), tokenizer.pad_token_id)
    labels = torch.full((len(tokens), width), -100)
    attention = torch.zeros((len(tokens), width), dtype=torch.long)
    for i, t in enumerate(tokens):
        n = len(t["input_ids"])
        ids[i, :n] = torch.tensor(t["input_ids"])
        attention[i, :n] = 1
        labels[i, :n] = torch.tensor([x if m else -100 for x, m in zip(t["input_ids"], t["assistant_masks"])])
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.train()
    print(f"bf16 supported natively: {bf16_supported()}; {len(tokens)} rows of up to {width} tokens")

    def one_pass(bf16: bool) -> tuple[float, float, torch.Tensor]:
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        seconds = time.perf_counter() - start
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        return seconds, float(loss.detach()), grad

    one_pass(False)  # warm-up
    one_pass(True)
    times = {False: [], True: []}
    results = {}
    for _ in range(args.repeats):
        for bf16 in (False, True):
            seconds, loss, grad = one_pass(bf16)
            times[bf16].append(seconds)
            results[bf16] = (loss, grad)
    fp32, bf16 = min(times[False]), min(times[True])
    # In float64: fp32 reductions over 135M entries drift enough to give a cosine above 1.
    a, b = results[False][1].double(), results[True][1].double()
    cosine = float(a @ b / (a.norm() * b.norm()))
    print(f"{'':>10} {'fp32':>10} {'bf16':>10} {'fp32/bf16':>10}")
    print(f"{'s / pass':>10} {fp32:>10.2f} {bf16:>10.2f} {fp32 / bf16:>10.2f}")
    print(f"{'loss':>10} {results[False][0]:>10.4f} {results[True][0]:>10.4f}")
    print(f"gradient cosine (bf16 vs fp32): {cosine:.4f}")


if __name__ == "__main__":
    main()
