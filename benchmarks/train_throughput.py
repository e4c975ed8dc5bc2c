"""Training throughput: MaskablePPO on harness envs against PPO on CartPole-v1, side by side.

    .venv/bin/python benchmarks/train_throughput.py [--env harness_gym/EnterText-Json-v0 ...]
        [--steps 4096] [--rounds 3]

Every run uses the same algorithm settings (``DEFAULT_HYPERPARAMS["maskable_ppo"]`` of
harness_gym.baselines.sb3: 4 envs x 128 steps per rollout, minibatch 128, 4 epochs, SB3's
default MLP) and one torch thread. Runs alternate round by round in one process, so machine
noise hits all of them alike; the figure that matters is the ratio. The harness side pays for
what a text env costs: task reset, rendering, parsing, hashing the observation text and the
action menu into features (``harness_gym.baselines.sb3.default_features``), action masks,
and a wider first layer. Frames per second count env steps during ``learn()``; model
construction is excluded. Target: harness FPS / CartPole FPS >= 0.5.

The ``MaskablePPO, free env`` row splits the gap: the same algorithm on an env with the same
spaces and masks whose steps cost nothing (a fixed observation), so it is the learner's own
cost at that input width. What separates it from a harness row is the env; what separates
it from CartPole is MaskablePPO's masking and the input width.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

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

N_ENVS = 4
DEFAULT_ENVS = ("harness_gym/ClickButton-Json-v0", "harness_gym/EnterText-Json-v0")


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


def fps(algo: type, make: Callable[[], gym.Env] | str, steps: int, seed: int) -> float:
    venv = make_vec_env(make, n_envs=N_ENVS, seed=seed)
    model = algo("MlpPolicy", venv, seed=seed, device="cpu", **DEFAULT_HYPERPARAMS["maskable_ppo"])
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
    args = parser.parse_args()
    torch.set_num_threads(1)
    features = HashedFeatures(
        dim=args.features_dim,
        menu_slots=DEFAULT_MAX_ACTIONS if args.menu_dim > 0 else 0,
        menu_dim=max(args.menu_dim, 8),
    )
    env_ids = args.env or list(DEFAULT_ENVS)

    results: dict[str, list[float]] = {e: [] for e in env_ids}
    results["free env"] = []
    results["CartPole-v1"] = []
    for r in range(args.rounds):
        seed = args.seed + r
        for env_id in env_ids:
            make = lambda env_id=env_id: adapt(gym.make(env_id), features=features)  # noqa: E731
            results[env_id].append(fps(MaskablePPO, make, args.steps, seed))
        results["free env"].append(fps(MaskablePPO, lambda: FreeEnv(features), args.steps, seed))
        results["CartPole-v1"].append(fps(PPO, "CartPole-v1", args.steps, seed))
        print(f"round {r}: " + " | ".join(f"{k.split('/')[-1]} {v[-1]:.0f} fps" for k, v in results.items()))

    cartpole = statistics.median(results["CartPole-v1"])
    width = max(len(k) for k in results) + 16
    setup = f"{N_ENVS} envs, 1 torch thread, {features.size} features"
    print(f"\nmedian of {args.rounds} rounds x {args.steps} steps ({setup}):")
    print(f"{'run':<{width}}  {'frames/s':>9}  {'ratio':>6}")
    for name, values in results.items():
        algo = "PPO" if name == "CartPole-v1" else "MaskablePPO,"
        med = statistics.median(values)
        print(f"{algo + ' ' + name.split('/')[-1]:<{width}}  {med:9.0f}  {med / cartpole:6.2f}")
    print("target: harness / CartPole >= 0.5")


if __name__ == "__main__":
    main()
