"""Preference recovery: a policy trained under a harness carries that harness's action values.

    .venv/bin/python experiments/preferences.py [--quick] [--out docs]

Under KL-regularized control the optimal policy is pi*(a|s) ∝ pi_ref(a|s) exp(Q_H(s,a)/beta),
so its log odds against the reference recover the harness's action-value differences:
log[pi*(a|s)/pi*(b|s)] - log[pi_ref(a|s)/pi_ref(b|s)] = (Q_H(s,a) - Q_H(s,b)) / beta.

The script trains the GRPO text policy (KL penalty to its frozen initial self) on EnterText
under two harnesses that differ only in the step budget, a factor the observation does not
show: ``tight`` (2 steps: exactly the oracle's) and ``loose`` (6 steps). The same observation
and the same action texts then carry different exact values Q_H, computed by exact search
through each harness (the KL-regularized, "soft" values against the uniform reference, for
which the identity is exact in a multi-step task). For each trained policy it correlates the
implied differences (log odds against the reference) with the exact differences under both
harnesses: each policy
should agree best with the harness it was trained under. It also checks the identity itself
on the exact soft-optimal policy. Writes ``preferences.md`` and ``preferences.png``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from harness_gym import Harness, make_env
from harness_gym.analysis.preferences import (
    PreferenceRecovery,
    SoftOptimalPolicy,
    collect_states,
    recover_preferences,
)
from harness_gym.baselines.text_policy import (
    TextPolicy,
    TextPolicyConfig,
    TextPolicyGRPOConfig,
    TextPolicyGRPOTrainer,
)

TASK = "EnterText"
HARNESSES = {"tight (budget 2)": Harness(step_budget=2), "loose (budget 6)": Harness(step_budget=6)}
BETA = 0.05


def train(harness: Harness, iterations: int, seed: int) -> tuple[TextPolicy, TextPolicy]:
    torch.manual_seed(seed)
    policy = TextPolicy(TextPolicyConfig())
    reference = TextPolicy(TextPolicyConfig())
    reference.load_state_dict(policy.state_dict())
    trainer = TextPolicyGRPOTrainer(
        policy,
        [lambda: make_env(TASK, harness)],
        TextPolicyGRPOConfig(beta=BETA, seed=seed, grouping="within"),
        reference=reference,
    )
    trainer.train(iterations=iterations)
    return policy, reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="docs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    n_states = 60 if args.quick else 300
    iterations = 4 if args.quick else 15
    states = {
        name: collect_states(TASK, h, range(n_states), max_prefix=1, soft_beta=BETA)
        for name, h in HARNESSES.items()
    }
    # Keep the states both harnesses reach with the same observation (the budget is not shown).
    keys = {name: {(s.observation, s.texts): s for s in st} for name, st in states.items()}
    shared = sorted(set.intersection(*(set(k) for k in keys.values())))
    table: dict[tuple[str, str], PreferenceRecovery] = {}
    identity: dict[str, PreferenceRecovery] = {}
    for trained_name, harness in HARNESSES.items():
        policy, reference = train(harness, iterations, args.seed)
        for q_name in HARNESSES:
            subset = [keys[q_name][k] for k in shared]
            table[(trained_name, q_name)] = recover_preferences(policy, reference, subset, BETA)
            print(
                f"trained {trained_name:18s} vs Q under {q_name:18s}: {table[(trained_name, q_name)]}",
                flush=True,
            )
        own = [keys[trained_name][k] for k in shared]
        identity[trained_name] = recover_preferences(
            SoftOptimalPolicy(reference, own, BETA), reference, own, BETA
        )
    write_outputs(
        Path(args.out), table, identity, len(shared), iterations, time.perf_counter() - start, args.quick
    )


def write_outputs(
    out: Path,
    table: dict[tuple[str, str], PreferenceRecovery],
    identity: dict[str, PreferenceRecovery],
    n_states: int,
    iterations: int,
    seconds: float,
    quick: bool,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    names = list(HARNESSES)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    rng = np.random.default_rng(0)
    for ax, trained in zip(axes[:2], names, strict=True):
        for q_name, color in zip(names, ("tab:blue", "tab:orange"), strict=True):
            rec = table[(trained, q_name)]
            jitter = rng.normal(0, 0.03, size=len(rec.exact))
            ax.scatter(
                rec.exact + jitter,
                rec.implied,
                s=6,
                alpha=0.35,
                color=color,
                label=f"exact Q under {q_name} (r={rec.pearson:.2f})",
            )
        ax.set_xlabel("exact Q_H(s,a) - Q_H(s,b)")
        ax.set_ylabel("beta x log-odds vs reference")
        ax.set_title(f"policy trained under {trained}")
        ax.legend(fontsize=7)
    matrix = np.array([[table[(t, q)].pearson for q in names] for t in names])
    im = axes[2].imshow(matrix, vmin=-1, vmax=1, cmap="RdBu")
    for i in range(2):
        for j in range(2):
            axes[2].text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center")
    axes[2].set_xticks([0, 1], [f"Q under {n}" for n in names], fontsize=8)
    axes[2].set_yticks([0, 1], [f"trained {n}" for n in names], fontsize=8)
    axes[2].set_title("correlation of implied and exact differences")
    fig.colorbar(im, ax=axes[2], fraction=0.046)
    fig.tight_layout()
    fig.savefig(out / "preferences.png", dpi=110)
    plt.close(fig)
    lines = [
        "# Preference recovery",
        "",
        "Regenerate (a few minutes on 2 CPU cores):",
        "",
        "```sh",
        ".venv/bin/python experiments/preferences.py --out docs",
        "```",
        "",
        f"Task `{TASK}`; two harnesses that differ only in the step budget, which the observation "
        f"does not show. The GRPO text policy was trained under each ({iterations} iterations, KL "
        f"coefficient beta={BETA}, reference = the initial policy). On {n_states} states that both "
        "harnesses render identically, implied differences (beta x log odds against the reference, "
        "over every pair of legal actions) are correlated with exact differences of Q_H, computed "
        "by exact search through each harness (its tools and the budget left). Q_H is the "
        "KL-regularized (soft) action value against the uniform reference (the untrained policy "
        "is exactly uniform), the value for which the identity holds in a multi-step task."
        + (" **Quick smoke run: small budgets.**" if quick else ""),
        "",
        "![preferences](preferences.png)",
        "",
        "| policy trained under | Q under | pairs | Pearson | Spearman | sign agreement |",
        "|---|---|---|---|---|---|",
    ]
    for (trained, q_name), rec in table.items():
        lines.append(
            f"| {trained} | {q_name} | {rec.n_pairs} | {rec.pearson:.3f} | {rec.spearman:.3f} "
            f"| {100 * rec.sign_agreement:.1f}% |"
        )
    lines += [
        "",
        "The identity itself, on the exact soft-optimal policy pi* ∝ pi_ref exp(Q_H/beta) over the "
        "same reference: " + "; ".join(f"{n}: Pearson {r.pearson:.3f}" for n, r in identity.items()) + ".",
        "",
        "Reading it: the identity is exact at the KL-regularized optimum (last line). A finite GRPO "
        "run is not that optimum, and its group-relative advantages are zero whenever every episode "
        "of a group succeeds, so under the loose budget it never learns that a wasted step is "
        "harmless: both trained policies prefer the direct path, which is what the tight harness "
        "values. The harness still shows in the recovered preferences: each policy's implied "
        "differences agree more with the loose harness's values when it was trained under the "
        "loose harness than when it was trained under the tight one.",
        "",
        f"Run time: {seconds / 60:.1f} minutes.",
        "",
    ]
    (out / "preferences.md").write_text("\n".join(lines))
    print(f"wrote {out / 'preferences.md'} and {out / 'preferences.png'}")


if __name__ == "__main__":
    main()
