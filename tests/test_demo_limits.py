"""`make demo`'s token limit fits every legal reply of its language-model sweep.

A limit below the longest reply cuts it before its closing tag (a native call needs 29 tokens
with the embedded model's tokenizer): the demo would then report the truncation as a harness
effect. Needs the embedded model's tokenizer (marker ``llm``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import gymnasium as gym
import pytest
import yaml

import harness_gym  # noqa: F401  (registers the envs)

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.llm


def demo_llm_sweep() -> tuple[int, list[str], dict]:
    """The demo's language-model sweep: its --max-tokens, its tasks, its space."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if "--agent llm" in ln and "sweep" in ln)
    limit = int(re.search(r"--max-tokens (\d+)", line).group(1))
    tasks = re.search(r"--tasks ((?:\w+ ?)+?) --", line).group(1).split()
    space = yaml.safe_load((ROOT / re.search(r"--space (\S+)", line).group(1)).read_text())
    return limit, tasks, space


def test_the_demo_limit_fits_the_longest_legal_reply() -> None:
    from transformers import AutoTokenizer

    from harness_gym.llm.embedded import embedded_model_path

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    limit, tasks, space = demo_llm_sweep()
    longest = 0
    for task in tasks:
        for style in space["factors"]["tool_style"]:
            for channel in space["factors"]["tool_channel"]:
                harness = {"tool_style": style, "tool_channel": channel}
                env = gym.make(f"harness_gym/{task}-v0", harness=harness)
                base = env.unwrapped
                for seed in range(50):
                    env.reset(seed=seed)
                    if channel == "native":  # as the model writes it: hermes tags around the call
                        name, arguments = base.bound.toolbox.call(base.task.oracle())
                        call = json.dumps({"name": name, "arguments": arguments})
                        reply = f"<tool_call>\n{call}\n</tool_call>"
                    else:
                        reply = base.oracle_action()
                    tokens = len(tokenizer(reply, add_special_tokens=False)["input_ids"]) + 1  # end of turn
                    longest = max(longest, tokens)
    assert longest <= limit, f"make demo's --max-tokens {limit} cuts replies of {longest} tokens"
    assert longest > 24  # the old limit cut them (the "tool_channel=native -25 pp")
