"""Training throughput: MaskablePPO on harness envs against PPO on CartPole-v1, side by side.

    .venv/bin/python benchmarks/train_throughput.py [--env harness_gym/EnterText-Json-v0 ...]
        [--steps 4096] [--rounds 3] [--sb3-defaults] [--torch-threads 1]

By default every run uses the baselines' settings (``DEFAULT_HYPERPARAMS["maskable_ppo"]`` of
harness_gym.baselines.sb3: 4 envs x 128 steps per rollout, minibatch 128, 4 epochs, SB3's
default MLP); ``--sb3-defaults`` uses SB3's own defaults for both algorithms instead (1 env,
2,048 steps per rollout, minibatch 64, 10 epochs), what ``PPO("MlpPolicy", "CartPole-v1")``
runs. One torch thread unless ``--torch-threads`` says otherwise. Runs alternate round by round
in one process, so machine noise hits all of them alike; the figure that matters is the ratio.
Frames per second count env steps during ``learn()``; model construction is excluded.
Target: harness FPS / CartPole FPS >= 0.5.

The MaskablePPO rows split the gap two ways, so the table says where a harness frame's time
goes:

* ``free env``: an env with the adapted envs' spaces and masks whose steps cost nothing (a fixed
  observation): the learner's own cost.
* ``8 features``: the same env with the observation hashed into 8 buckets and no menu, a
  policy input too narrow to learn from: what is left when the input width costs nothing.

So ``free env, 8 features`` is MaskablePPO's masking alone; ``free env`` adds the default input
width (``harness_gym.baselines.sb3.default_features``); a task at 8 features adds the text env
(task reset and step, rendering, parsing, hashing the text, masks); a task at the default
features is what ``sb3.train`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import harness_gym  # noqa: F401  (registers the envs)
from harness_gym.baselines.sb3 import DEFAULT_HYPERPARAMS, adapt, default_features
from harness_gym.wrappers.discrete import DEFAULT_MAX_ACTIONS
from harness_gym.wrappers.encoding import HashedFeatures

DEFAULT_ENVS = ("harness_gym/ClickButton-Json-v0", "harness_gym/EnterText-Json-v0")
#: The narrowest encoding: what a frame costs when the policy's input width costs nothing.
NARROW = HashedFeatures(dim=8, menu_slots=0)


class FreeEnv(gym.Env):
    """The adapted envs' spaces and masks at no cost: a fixed observation, 4-step episodes."""

    def __init__(self, features: HashedFeatures) -> None:
        self.observation_space = features.space
        self.action_space = gym.spaces.Discrete(DEFAULT_MAX_ACTIONS)
        rng = np.random.default_rng(0)
        self._observation = (rng.random(features.size) < 0.06).astype(np.float32)
        self._mask = np.arange(DEFAULT_MAX_ACTIONS) < 5
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self._observation.copy(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        return self._observation.copy(), float(action == 1), self._t >= 4, False, {}

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()


def fps(
    algo: type, make: Callable[[], gym.Env] | str, steps: int, seed: int, n_envs: int, params: dict[str, Any]
) -> float:
    venv = make_vec_env(make, n_envs=n_envs, seed=seed)
    model = algo("MlpPolicy", venv, seed=seed, device="cpu", **params)
    start = time.perf_counter()
    model.learn(steps)
    elapsed = time.perf_counter() - start
    venv.close()
    return model.num_timesteps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", action="append", help=f"harness env id (repeatable; default {DEFAULT_ENVS})")
    parser.add_argument("--steps", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    default = default_features()
    parser.add_argument("--features-dim", type=int, default=default.dim, help="observation buckets")
    parser.add_argument("--menu-dim", type=int, default=default.menu_dim, help="menu buckets (0: no menu)")
    parser.add_argument(
        "--sb3-defaults", action="store_true", help="SB3's algorithm defaults and 1 env for every run"
    )
    parser.add_argument("--torch-threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    features = HashedFeatures(
        dim=args.features_dim,
        menu_slots=DEFAULT_MAX_ACTIONS if args.menu_dim > 0 else 0,
        menu_dim=max(args.menu_dim, 8),
    )
    n_envs, params = (1, {}) if args.sb3_defaults else (4, DEFAULT_HYPERPARAMS["maskable_ppo"])
    runs: dict[str, tuple[type, Callable[[], gym.Env] | str]] = {}
    for env_id in args.env or DEFAULT_ENVS:
        name = env_id.split("/")[-1]
        for label, feats in ((name, features), (f"{name}, 8 features", NARROW)):
            make = lambda env_id=env_id, feats=feats: adapt(gym.make(env_id), features=feats)  # noqa: E731
            runs[label] = (MaskablePPO, make)
    runs["free env"] = (MaskablePPO, lambda: FreeEnv(features))
    runs["free env, 8 features"] = (MaskablePPO, lambda: FreeEnv(NARROW))
    runs["CartPole-v1"] = (PPO, "CartPole-v1")

    results: dict[str, list[float]] = {label: [] for label in runs}
    for r in range(args.rounds):
        for label, (algo, make) in runs.items():
            results[label].append(fps(algo, make, args.steps, args.seed + r, n_envs, params))
        print(f"round {r}: " + " | ".join(f"{k} {v[-1]:.0f}" for k, v in results.items()))

    cartpole = statistics.median(results["CartPole-v1"])
    width = max(len(k) for k in results) + 14
    setup = "SB3 defaults" if args.sb3_defaults else "the baselines' settings"
    print(
        f"\nmedian of {args.rounds} rounds x {args.steps} steps ({setup}: {n_envs} env(s), "
        f"{args.torch_threads} torch thread(s), {features.size} features unless 8):"
    )
    print(f"{'run':<{width}}  {'frames/s':>9}  {'us/frame':>8}  {'ratio':>6}")
    for label, values in results.items():
        algo = "PPO" if label == "CartPole-v1" else "MaskablePPO,"
        med = statistics.median(values)
        print(f"{algo + ' ' + label:<{width}}  {med:9.0f}  {1e6 / med:8.0f}  {med / cartpole:6.2f}")
    print("target: harness / CartPole >= 0.5")


if __name__ == "__main__":
    main()
