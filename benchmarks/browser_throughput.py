"""Real-browser throughput: harness-gym's Playwright backend against Farama's Selenium miniwob.

    .venv/bin/python benchmarks/browser_throughput.py [--episodes 10] [--rounds 3] [--tasks click-button ...]

Part 1 runs the same real MiniWoB++ task instances with the same scripted policy on both
backends, side by side in one process, interleaved round by round (so machine noise hits all
alike), and reports episodes per second and their ratios. Farama's environment runs twice:
as shipped (it captures a screenshot with every observation) and with
``record_screenshots=False``, the same work as harness-gym's (which captures none): the fair
ratio, whose target for harness-gym's default (``reuse_page``: each episode in the previous
one's document where that is exact, DevTools over Playwright's pipe, no port open) is at
least 5x. harness-gym also runs with ``devtools="port"`` (a DevTools port on 127.0.0.1 and a
connection of its own, one process hop fewer per call: what the pipe costs) and with
``reuse_page=False`` (a freshly loaded document per episode). Each task's episodes per second
and ratios are the median over rounds with their range, each ratio taken within a round; the
summary gives the median ratio over tasks and how many tasks reach 5x, with the load average
(the machine is shared). Every episode of every env plays
the same MiniWoB instance: harness-gym's ``info["miniwob_seed"]`` for its reset seed is given to Farama's
``reset(seed=...)`` (both call ``Math.seedrandom`` with it), and the utterances are compared.
The policy is ``harness_gym.envs.browser.oracles``: on this backend it reads the fields through
the canonical ``Json`` harness (the full ``BrowserEnv`` step: harness parse, task step,
render); on Farama's it reads ``miniwob``'s DOM observation, converted to the same element
tree, and acts with ``CLICK_ELEMENT`` / ``FOCUS_ELEMENT_AND_TYPE_TEXT``. Farama's environment
is Debian's ``chromium`` and ``chromium-driver``, headless.

``--typing`` measures a ``type`` action of 10 and of 1,000 characters side by side (target: the
long one within 3x the short one).

Part 2 reports steps per second of each real task against its pure-Python twin in the web
suite, both through ``HarnessEnv`` with the ``Json`` harness and their oracles.

Part 3 (``--sim-to-real N``) is the sim-to-real table: the same agents (uniform random over
the legal actions, and each backend's oracle) on every twin pair, N seeds each.

``--screenshots N`` measures what ``screenshots=True`` (a PNG of the task area in ``info``
after every reset and step) costs: episodes per second with screenshots off and on, side by
side in one process, interleaved round by round, N episodes per task per round, both with the
default ``reuse_page`` and with ``reuse_page=False`` (a fresh document per episode).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import gymnasium as gym
import numpy as np

import harness_gym
import harness_gym.envs.browser as browser_pkg
from harness_gym import make_env
from harness_gym.baselines.agents import OracleAgent, RandomAgent
from harness_gym.core.task import Action
from harness_gym.envs.browser.dom import walk
from harness_gym.envs.browser.env import make_browser_env
from harness_gym.envs.browser.launch import find_chromium
from harness_gym.envs.browser.oracles import ORACLES
from harness_gym.envs.browser.tasks import TWINS, task_id_for
from harness_gym.rollout import run_episode

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


def make_farama(subdomain: str, screenshots: bool = True) -> gym.Env:
    """Farama's env; ``screenshots=False`` turns off its per-observation screenshot."""
    os.environ.setdefault("MINIWOB_CHROME_BINARY", find_chromium())
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", "/usr/bin/chromedriver")
    import miniwob

    gym.register_envs(miniwob)
    env = gym.make(f"miniwob/{subdomain}-v1")
    env.reset(seed=0, options={"record_screenshots": screenshots})  # starts it; the option sticks
    return env


def miniwob_seed(seed: int) -> int:
    """The MiniWoB seed harness-gym's ``reset(seed=seed)`` plays (``info["miniwob_seed"]``)."""
    return int(np.random.default_rng(seed).integers(0, 2**31 - 1))


def run_farama(
    env: gym.Env, subdomain: str, seeds: range, utterances: dict[int, str]
) -> tuple[float, int, int]:
    """Seconds, episodes solved, steps for the MiniWoB instances of harness-gym's ``seeds``;
    each episode's utterance goes to ``utterances``."""
    policy = ORACLES[subdomain]
    solved = steps = 0
    start = time.perf_counter()
    for seed in seeds:
        obs, _ = env.reset(seed=miniwob_seed(seed))
        utterances[seed] = obs["utterance"]
        for _ in range(20):
            action = farama_action(env, policy(farama_fields(obs)))
            obs, reward, terminated, truncated, _ = env.step(action)
            steps += 1
            if terminated or truncated:
                solved += reward > 0
                break
    return time.perf_counter() - start, solved, steps


# -- this package -----------------------------------------------------------------------------


#: Resets of browser envs that ran in the previous episode's document, and all their resets.
REUSED = {"reused": 0, "resets": 0}


def run_env(env: gym.Env, seeds: range, utterances: dict[int, str] | None = None) -> tuple[float, int, int]:
    """Seconds, episodes solved, steps for ``seeds`` oracle episodes of a HarnessEnv (a browser
    env's utterances go to ``utterances``, and its reused resets are counted in ``REUSED``)."""
    base = env.unwrapped
    solved = steps = 0
    start = time.perf_counter()
    for seed in seeds:
        _, info = env.reset(seed=seed)
        if "page_reused" in info:
            REUSED["reused"] += bool(info["page_reused"])
            REUSED["resets"] += 1
        if utterances is not None:
            assert info["miniwob_seed"] == miniwob_seed(seed), "the benchmark's seed mapping is stale"
            utterances[seed] = base.task.fields()["instruction"]
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


def _process_tree() -> list[int]:
    """This process and all its descendants (Playwright's driver, chromedriver, the browsers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()  # noqa: SIM115
            except OSError:
                continue
            children.setdefault(int(stat[stat.rfind(")") + 2 :].split()[1]), []).append(int(entry))
    tree, stack = [], [os.getpid()]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack.extend(children.get(pid, []))
    return tree


def _cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU time of these processes (those still alive)."""
    total = 0.0
    for pid in pids:
        try:
            stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def cpu_per_episode(tasks: list[str], episodes: int) -> None:
    """CPU milliseconds per oracle episode of each env, all its processes counted: a measure
    that other jobs on the machine barely distort (unlike episodes per second)."""
    print(f"\n== Part 1b: CPU ms per episode (Python, driver, browser; {episodes} episodes) ==")
    rows = []
    for t in tasks:
        cost = {}
        for kind in ("shots", "noshots", "ours", "fresh"):
            if kind in ("ours", "fresh"):
                env = make_browser_env(task_id_for(t), reuse_page=kind == "ours")
                run = lambda seeds, env=env: run_env(env, seeds)  # noqa: E731
            else:
                env = make_farama(t, screenshots=kind == "shots")
                run = lambda seeds, env=env, t=t: run_farama(env, t, seeds, {})  # noqa: E731
            run(range(5))  # warm caches
            before = _cpu_seconds(tree := _process_tree())
            run(range(3000, 3000 + episodes))
            cost[kind] = (_cpu_seconds(tree) - before) * 1000 / episodes
            env.close()
        rows.append(
            [t, *(f"{cost[k]:.0f}" for k in ("shots", "noshots", "ours", "fresh"))]
            + [f"{cost['noshots'] / cost['ours']:.2f}x", f"{cost['noshots'] / cost['fresh']:.2f}x"]
        )
    print(table(["task", "F", "F-noshot", "hg", "hg-fresh", "F-noshot/hg", "F-noshot/hg-fresh"], rows))


def typing_cost(repeats: int) -> None:
    """A ``type`` of 10 and of 1,000 characters into the same text box, interleaved."""
    print("\n== Typing: one type action, 10 vs 1,000 characters (enter-text) ==")
    env = make_browser_env("BrowserEnterText")
    env.reset(seed=0)
    task = env.unwrapped.task
    box = next(n for n in walk(task.fields()["page"]) if n["tag"] == "input")
    times: dict[int, list[float]] = {10: [], 1000: []}
    for _ in range(repeats):
        for length in times:
            text = ("abcdefghij" * (length // 10 + 1))[:length]
            start = time.perf_counter()
            task.step(Action.of("type", ref=box["ref"], text=text))
            times[length].append(time.perf_counter() - start)
            assert next(n for n in walk(task.fields()["page"]) if n["ref"] == box["ref"])["value"] == text
    env.close()
    short, long = statistics.median(times[10]), statistics.median(times[1000])
    print(
        f"median type: 10 chars {short * 1000:.1f} ms, 1000 chars {long * 1000:.1f} ms: {long / short:.2f}x"
    )


def screenshot_cost(tasks: list[str], episodes: int, rounds: int) -> None:
    """Episodes/s of the same oracle episodes with ``screenshots`` off and on, interleaved."""
    print(f"\n== Screenshots: episodes/s off vs on ({rounds} rounds of {episodes} episodes per task) ==")
    kinds = [(reuse, shots) for reuse in (True, False) for shots in (False, True)]
    envs = {
        (t, reuse, shots): make_browser_env(task_id_for(t), reuse_page=reuse, screenshots=shots)
        for t in tasks
        for reuse, shots in kinds
    }
    for env in envs.values():  # warm up: browsers started, first page loads done
        run_env(env, range(1))
    totals = {key: [0.0, 0, 0] for key in envs}  # seconds, solved, steps
    for r in range(rounds):
        seeds = range(4000 + r * episodes, 4000 + (r + 1) * episodes)
        for t in tasks:
            for reuse, shots in kinds[r % 4 :] + kinds[: r % 4]:  # rotate who goes first
                for i, value in enumerate(run_env(envs[t, reuse, shots], seeds)):
                    totals[t, reuse, shots][i] += value
    for env in envs.values():
        env.close()
    n = rounds * episodes
    rows = []
    for t in [*tasks, "ALL"]:
        picked = tasks if t == "ALL" else [t]
        cells = [t]
        for reuse in (True, False):
            off = [sum(totals[x, reuse, False][i] for x in picked) for i in range(3)]
            on = [sum(totals[x, reuse, True][i] for x in picked) for i in range(3)]
            count = n * len(picked)
            captures = on[2] + count  # one per step and one per reset
            cells += [
                f"{count / off[0]:.1f}",
                f"{count / on[0]:.1f}",
                f"{off[0] / on[0]:.2f}x",
                f"{(on[0] - off[0]) * 1000 / captures:.0f}",
                f"{on[1] / count:.0%}",
            ]
        rows.append(cells)
    header = ["task", "off eps/s", "on eps/s", "on/off", "ms/capture", "ok on"]
    header += ["fresh " + h for h in header[1:]]
    print(table(header, rows))
    print(
        "off/on: screenshots=False/True, the default reuse_page; fresh: reuse_page=False. "
        "on/off: episodes/s with screenshots on over off; ms/capture: the extra time per capture "
        "(one after every reset and every step)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS)
    parser.add_argument("--episodes", type=int, default=10, help="episodes per task per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--twin-steps", type=int, default=200, help="steps per twin measurement")
    parser.add_argument(
        "--sim-to-real", type=int, default=0, metavar="N", help="seeds per twin pair (0: skip)"
    )
    parser.add_argument("--skip-throughput", action="store_true", help="skip parts 1 and 2")
    parser.add_argument("--typing", type=int, default=0, metavar="N", help="type-cost repeats (0: skip)")
    parser.add_argument("--cpu", type=int, default=0, metavar="N", help="CPU per episode over N (0: skip)")
    parser.add_argument(
        "--screenshots", type=int, default=0, metavar="N", help="screenshots off vs on, N episodes (0: skip)"
    )
    args = parser.parse_args()
    browser_pkg.register()
    if not args.skip_throughput:
        throughput(args)
    if args.cpu:
        cpu_per_episode(args.tasks, args.cpu)
    if args.typing:
        typing_cost(args.typing)
    if args.sim_to_real:
        sim_to_real(args.sim_to_real)
    if args.screenshots:
        screenshot_cost(args.tasks, args.screenshots, args.rounds)
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


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    """The median of ``values`` with their range over rounds: ``median (min-max)``."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


#: Harness-gym's kinds in Part 1: the default (reused pages where exact, DevTools over
#: Playwright's pipe), the DevTools port mode, and a fresh document per episode.
OURS = {"ours": {}, "port": {"devtools": "port"}, "fresh": {"reuse_page": False}}
#: The ratio a default env must reach over Farama's screenshot-free env.
TARGET = 5.0


def throughput(args: argparse.Namespace) -> None:
    import warnings

    from harness_gym.envs.browser.browser import BrowserSession
    from harness_gym.envs.browser.devtools import DevToolsPortWarning

    print("== Part 1: episodes/s, same tasks, same MiniWoB instances, same scripted policy ==")
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    # harness-gym as by default (reuse_page where exact, DevTools over Playwright's pipe);
    # harness-gym with the DevTools port (devtools="port"); harness-gym with reuse_page=False
    # (a fresh document per episode); Farama as shipped; Farama without screenshots.
    kinds = ["ours", "port", "fresh", "shots", "noshots"]
    warnings.simplefilter("ignore", DevToolsPortWarning)  # measured on purpose
    # One browser per env, as make_browser_env gives by default and as Farama's env has: a session
    # shared by the ten tasks would start each task's turn in a new document (a session reuses
    # only its active page), a cost no single training loop pays.
    sessions = {
        (k, t): BrowserSession(devtools=o.get("devtools")) for k, o in OURS.items() for t in args.tasks
    }
    envs: dict[str, dict[str, gym.Env]] = {
        k: {
            t: make_browser_env(task_id_for(t), session=sessions[k, t], reuse_page=o.get("reuse_page", True))
            for t in args.tasks
        }
        for k, o in OURS.items()
    }
    envs["shots"] = {t: make_farama(t, screenshots=True) for t in args.tasks}
    envs["noshots"] = {t: make_farama(t, screenshots=False) for t in args.tasks}
    said: dict[str, dict[tuple[str, int], str]] = {k: {} for k in kinds}

    def run(kind: str, task: str, seeds: range) -> tuple[float, int, int]:
        heard: dict[int, str] = {}
        if kind in OURS:
            result = run_env(envs[kind][task], seeds, heard)
        else:
            result = run_farama(envs[kind][task], task, seeds, heard)
        said[kind].update({(task, seed): text for seed, text in heard.items()})
        return result

    for t in args.tasks:  # warm up: browsers started, first page loads done
        for kind in kinds:
            run(kind, t, range(1))
    REUSED.update(reused=0, resets=0)
    # per kind, per task: (seconds, solved, steps) of every round
    rounds: dict[str, dict[str, list[tuple[float, int, int]]]] = {
        k: {t: [] for t in args.tasks} for k in kinds
    }
    for r in range(args.rounds):
        seeds = range(1000 + r * args.episodes, 1000 + (r + 1) * args.episodes)
        for t in args.tasks:
            for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:  # rotate who goes first
                rounds[kind][t].append(run(kind, t, seeds))
    same = sum(len({said[k][key] for k in kinds}) == 1 for key in said["ours"])
    n = args.rounds * args.episodes
    eps = {k: {t: [args.episodes / v[0] for v in rounds[k][t]] for t in args.tasks} for k in kinds}
    rows, medians = [], {"ours": [], "port": []}
    for t in args.tasks:
        cells = [t]
        for k in ("shots", "noshots", "ours", "port", "fresh"):
            cells.append(spread(eps[k][t]))
            cells.append(f"{sum(v[1] for v in rounds[k][t]) / n:.0%}")
        for ours in ("ours", "port"):  # the ratio over Farama without screenshots, round by round
            ratios = [a / b for a, b in zip(eps[ours][t], eps["noshots"][t])]
            medians[ours].append(statistics.median(ratios))
            cells.append(spread(ratios, "{:.2f}") + "x")
        cells.append(f"{statistics.median(eps['ours'][t]) / statistics.median(eps['port'][t]):.2f}")
        rows.append(cells)
    header = ["task", "F eps/s", "ok", "F-noshot eps/s", "ok", "hg eps/s", "ok", "hg-port eps/s", "ok"]
    header += ["hg-fresh eps/s", "ok", "hg/F-noshot", "hg-port/F-noshot", "hg/hg-port"]
    print(table(header, rows))
    print(
        "eps/s and ratios: median over rounds (min-max); ratios are taken round by round (the same "
        "seeds in the same round). F: Farama as shipped (a screenshot per observation); F-noshot: "
        "record_screenshots=False; hg: harness-gym as by default (reuse_page, DevTools over "
        "Playwright's pipe); hg-port: devtools='port'; hg-fresh: reuse_page=False"
    )
    for ours, label in (("ours", "hg (pipe, the default)"), ("port", "hg-port")):
        reach = sum(m >= TARGET for m in medians[ours])
        print(
            f"{label} / F-noshot: median of the per-task medians {statistics.median(medians[ours]):.2f}x; "
            f"{reach} of {len(medians[ours])} tasks reach {TARGET:g}x"
        )
    print(f"same MiniWoB instance (utterance) in all five envs: {same}/{len(said['ours'])} episodes")
    print(
        f"harness-gym resets in the previous episode's document: {REUSED['reused']}/{REUSED['resets']} "
        "(hg, hg-port and hg-fresh together; hg-fresh never reuses)"
    )
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for group in envs.values():
        for env in group.values():
            env.close()
    for session in sessions.values():
        session.close()

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
