"""Real-browser throughput: harness-gym's Playwright backend against Farama's Selenium miniwob.

    .venv/bin/python benchmarks/browser_throughput.py [--episodes 10] [--rounds 3] [--tasks click-button ...]

Part 1 runs the same real MiniWoB++ tasks with the same scripted policy on both backends,
side by side in one process, interleaved round by round (so machine noise hits both alike),
and reports episodes per second and their ratio (target: at least 2x). The policy is
``harness_gym.envs.browser.oracles``: on this backend it reads the fields through the
canonical ``Json`` harness (the full ``BrowserEnv`` step: harness parse, task step, render);
on Farama's it reads ``miniwob``'s DOM observation, converted to the same element tree, and
acts with ``CLICK_ELEMENT`` / ``FOCUS_ELEMENT_AND_TYPE_TEXT``. Farama's environment runs as
shipped (Debian's ``chromium`` and ``chromium-driver``, headless).

Part 2 reports steps per second of each real task against its pure-Python twin in the web
suite, both through ``HarnessEnv`` with the ``Json`` harness and their oracles.

Part 3 (``--sim-to-real N``) is the sim-to-real table: the same agents (uniform random over
the legal actions, and each backend's oracle) on every twin pair, N seeds each.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import gymnasium as gym

import harness_gym
import harness_gym.envs.browser as browser_pkg
from harness_gym import make_env
from harness_gym.analysis.rollout import run_episode
from harness_gym.baselines.agents import OracleAgent, RandomAgent
from harness_gym.core.task import Action
from harness_gym.envs.browser.browser import find_chromium
from harness_gym.envs.browser.env import make_browser_env
from harness_gym.envs.browser.oracles import ORACLES
from harness_gym.envs.browser.tasks import TWINS, task_id_for

#: Tasks whose oracle reads only what Farama's DOM observation also carries.
DEFAULT_TASKS = [
    "click-test",
    "click-test-2",
    "click-button",
    "click-link",
    "focus-text",
    "enter-text",
    "enter-password",
    "login-user",
    "click-option",
    "click-checkboxes",
]


# -- Farama's Selenium environment -----------------------------------------------------------


def farama_fields(obs: dict[str, Any]) -> dict[str, Any]:
    """Farama's DOM observation as this package's element tree (the oracles' input)."""
    by_ref: dict[int, dict[str, Any]] = {}
    roots: list[dict[str, Any]] = []
    for raw in obs["dom_elements"]:
        tag = raw["tag"].lower()
        node: dict[str, Any] = {"ref": int(raw["ref"]), "tag": tag}
        if tag.startswith("input_"):
            node["tag"], node["type"] = "input", tag[len("input_") :]
            if node["type"] in ("checkbox", "radio"):
                node["checked"] = raw["value"] == "True"
            else:
                node["value"] = raw["value"]
        elif tag == "textarea":
            node["value"] = raw["value"]
        if raw["text"]:
            node["text"] = raw["text"]
        if raw["id"]:
            node["id"] = raw["id"]
        if raw["classes"]:
            node["class"] = raw["classes"]
        if raw["flags"][0]:
            node["focused"] = True
        by_ref[node["ref"]] = node
        parent = by_ref.get(int(raw["parent"]))
        if node["tag"] == "t" and parent is not None:  # a text run beside elements: parent's text
            parent["text"] = " ".join(filter(None, [parent.get("text", ""), node.get("text", "")]))
            continue
        (parent.setdefault("children", []) if parent is not None else roots).append(node)
    page = roots[0].get("children", []) if roots and roots[0]["tag"] == "body" else roots
    return {"instruction": obs["utterance"], "title": "", "page": page}


def farama_action(env: gym.Env, action: Action) -> dict[str, Any]:
    from miniwob.action import ActionTypes

    base = env.unwrapped
    if action.name == "click":
        return base.create_action(ActionTypes.CLICK_ELEMENT, ref=action["ref"])
    if action.name == "type":
        return base.create_action(
            ActionTypes.FOCUS_ELEMENT_AND_TYPE_TEXT, ref=action["ref"], text=action["text"]
        )
    raise ValueError(f"no Farama action for {action}")


def make_farama(subdomain: str) -> gym.Env:
    os.environ.setdefault("MINIWOB_CHROME_BINARY", find_chromium())
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", "/usr/bin/chromedriver")
    import miniwob

    gym.register_envs(miniwob)
    return gym.make(f"miniwob/{subdomain}-v1")


def run_farama(env: gym.Env, subdomain: str, seeds: range) -> tuple[float, int, int]:
    """Seconds, episodes solved, steps for ``seeds`` episodes."""
    policy = ORACLES[subdomain]
    solved = steps = 0
    start = time.perf_counter()
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        for _ in range(20):
            action = farama_action(env, policy(farama_fields(obs)))
            obs, reward, terminated, truncated, _ = env.step(action)
            steps += 1
            if terminated or truncated:
                solved += reward > 0
                break
    return time.perf_counter() - start, solved, steps


# -- this package -----------------------------------------------------------------------------


def run_env(env: gym.Env, seeds: range) -> tuple[float, int, int]:
    """Seconds, episodes solved, steps for ``seeds`` oracle episodes of a HarnessEnv."""
    base = env.unwrapped
    solved = steps = 0
    start = time.perf_counter()
    for seed in seeds:
        env.reset(seed=seed)
        done = False
        info: dict[str, Any] = {}
        while not done:
            _, _, terminated, truncated, info = env.step(base.oracle_action())
            steps += 1
            done = terminated or truncated
        solved += bool(info.get("success"))
    return time.perf_counter() - start, solved, steps


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS)
    parser.add_argument("--episodes", type=int, default=10, help="episodes per task per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--twin-steps", type=int, default=200, help="steps per twin measurement")
    parser.add_argument(
        "--sim-to-real", type=int, default=0, metavar="N", help="seeds per twin pair (0: skip)"
    )
    parser.add_argument("--skip-throughput", action="store_true", help="only the sim-to-real table")
    args = parser.parse_args()
    browser_pkg.register()
    if not args.skip_throughput:
        throughput(args)
    if args.sim_to_real:
        sim_to_real(args.sim_to_real)
    print(f"\nharness-gym {harness_gym.__version__}; Chromium at {find_chromium()}")


def sim_to_real(seeds: int) -> None:
    print(f"\n== Part 3: sim-to-real, success over {seeds} seeds (Json harness) ==")
    rows = []
    for subdomain, twin in TWINS.items():
        real = make_browser_env(task_id_for(subdomain))
        sim = make_env(twin, "Json")
        row = [f"{twin} / {subdomain}"]
        for name in ("random", "oracle"):
            for env in (sim, real):
                agent = RandomAgent(0) if name == "random" else OracleAgent(env)
                wins = sum(run_episode(env, agent, seed).success for seed in range(seeds))
                row.append(f"{wins / seeds:.0%}")
        real.close()
        rows.append(row)
    print(table(["web twin / real task", "random sim", "random real", "oracle sim", "oracle real"], rows))


def throughput(args: argparse.Namespace) -> None:
    print("== Part 1: episodes/s, same tasks, same scripted policy ==")
    ours = {t: make_browser_env(task_id_for(t)) for t in args.tasks}
    theirs = {t: make_farama(t) for t in args.tasks}
    for t in args.tasks:  # warm up: browsers started, first page loads done
        run_env(ours[t], range(1))
        run_farama(theirs[t], t, range(1))
    totals = {t: [0.0, 0, 0, 0.0, 0, 0] for t in args.tasks}  # ours: s, solved, steps; theirs: same
    for r in range(args.rounds):
        seeds = range(1000 + r * args.episodes, 1000 + (r + 1) * args.episodes)
        for t in args.tasks:
            order = ["ours", "farama"] if r % 2 == 0 else ["farama", "ours"]
            for which in order:  # alternate who goes first
                if which == "ours":
                    offset, (seconds, solved, steps) = 0, run_env(ours[t], seeds)
                else:
                    offset, (seconds, solved, steps) = 3, run_farama(theirs[t], t, seeds)
                totals[t][offset] += seconds
                totals[t][offset + 1] += solved
                totals[t][offset + 2] += steps
    n = args.rounds * args.episodes
    rows = []
    for t in args.tasks:
        o_s, o_ok, o_steps, f_s, f_ok, f_steps = totals[t]
        rows.append(
            [t, f"{n / f_s:.1f}", f"{f_ok / n:.0%}", f"{n / o_s:.1f}", f"{o_ok / n:.0%}", f"{f_s / o_s:.2f}x"]
        )
    o_total = sum(v[0] for v in totals.values())
    f_total = sum(v[3] for v in totals.values())
    count = n * len(args.tasks)
    rows.append(
        ["ALL", f"{count / f_total:.1f}", "", f"{count / o_total:.1f}", "", f"{f_total / o_total:.2f}x"]
    )
    print(table(["task", "farama eps/s", "solved", "harness-gym eps/s", "solved", "ratio"], rows))
    for env in [*ours.values(), *theirs.values()]:
        env.close()

    print("\n== Part 2: steps/s, real task vs its pure-Python twin (oracle, Json harness) ==")
    rows = []
    for subdomain, twin in TWINS.items():
        if subdomain not in args.tasks and subdomain not in ("choose-list", "click-tab"):
            continue
        real = make_browser_env(task_id_for(subdomain))
        sim = make_env(twin, "Json")
        run_env(real, range(1))
        real_s, _, real_steps = run_env(real, range(2000, 2000 + max(5, args.twin_steps // 10)))
        sim_s, _, sim_steps = run_env(sim, range(2000, 2000 + args.twin_steps))
        real.close()
        rows.append(
            [
                f"{subdomain} / {twin}",
                f"{real_steps / real_s:.0f}",
                f"{sim_steps / sim_s:.0f}",
                f"{(sim_steps / sim_s) / (real_steps / real_s):.0f}x",
            ]
        )
    print(table(["real / twin", "real steps/s", "twin steps/s", "twin faster by"], rows))


if __name__ == "__main__":
    main()
