"""``harness-gym play ENV_ID --seed N``: play an env by hand in the terminal."""

from __future__ import annotations

import argparse
from typing import TextIO

from harness_gym.cli.common import make_env, require_env_id, seed_int

HELP = "play an env by hand in the terminal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id")
    parser.add_argument("--seed", type=seed_int, default=0)


def run(args: argparse.Namespace, out: TextIO, inp: TextIO) -> int:
    env = make_env(require_env_id(args.env_id))
    base = env.unwrapped
    observation, info = env.reset(seed=args.seed)
    out.write(f"=== system prompt ===\n{base.system_prompt}\n")
    out.write(
        "Type an action as the agent would, '#N' to send legal action N, "
        "'?' to see the oracle's action, 'q' to quit.\n"
    )
    total = 0.0
    while True:
        out.write(f"\n=== observation (step {info['step']}) ===\n{observation}\n")
        out.write("--- legal actions ---\n")
        for i, text in enumerate(info["legal_actions"]):
            out.write(f"  #{i}: {text}\n")
        out.write("> ")
        out.flush()
        line = inp.readline()
        if not line or line.strip() == "q":
            break
        text = line.rstrip("\n")
        if text.strip() == "?":
            out.write(f"oracle: {base.oracle_action()}\n")
            continue
        if text.startswith("#") and text[1:].strip().isdigit():
            index = int(text[1:])
            if not 0 <= index < len(info["legal_actions"]):
                out.write(f"no legal action #{index}\n")
                continue
            text = info["legal_actions"][index]
        observation, reward, terminated, truncated, info = env.step(text)
        total += float(reward)
        if info["last_error"]:
            out.write(f"!! {info['error_kind']}: {info['last_error']}\n")
        if terminated or truncated:
            out.write(
                f"\nepisode over: return={total} success={info['success']} "
                f"steps={info['step']} invalid={info['invalid_actions']}\n"
            )
            break
    env.close()
    return 0
