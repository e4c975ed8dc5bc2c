"""stable-baselines3 baselines (PPO, MaskablePPO, DQN) on any harness env, through the adapters.

The env a model trains on is ``TextEncoder(DiscreteActions(env))``: a ``Discrete(K)`` menu of
the legal actions as the harness writes them, and hashed text features of the observation as
the harness renders it. A saved model directory holds everything needed to rebuild that view
and to know what the model was trained under::

    model.zip      the SB3 model
    run.json       algo, env id, task id, harness spec and id, seed, steps, menu size K,
                   feature settings, hyperparameters
    harness.json   the training harness spec (and harness.yaml when PyYAML is installed)

:func:`evaluate` plays a saved model through *any* harness of the same task: the model keeps
its input encoding, and the harness decides what text there is to encode.

This module imports torch and stable-baselines3; ``import harness_gym`` does not import it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

try:
    import stable_baselines3
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "harness_gym.baselines.sb3 needs torch, stable-baselines3 and sb3-contrib: "
        "pip install 'harness-gym[rl]' (torch is pinned to the CPU build 2.13.0)"
    ) from err

from harness_gym.baselines.tuned import tuned
from harness_gym.core.env import unwrap_harness_env
from harness_gym.core.harness import Harness
from harness_gym.core.presets import resolve_harness
from harness_gym.logging_backends import check_backend, open_log, sb3_logger
from harness_gym.progress import progress as progress_iter
from harness_gym.progress import progress_bar
from harness_gym.rollout import EpisodeResult, run_episode
from harness_gym.wrappers.discrete import (
    DEFAULT_MAX_ACTIONS,
    INVALID_ACTION_TEXT,
    DiscreteActions,
    legal_mask,
)
from harness_gym.wrappers.encoding import HashedFeatures, TextEncoder

ALGOS: dict[str, type[BaseAlgorithm]] = {"ppo": PPO, "maskable_ppo": MaskablePPO, "dqn": DQN}

#: The hyperparameters of each algo's ``default`` entry (harness_gym/baselines/hyperparams/):
#: short harness-env episodes (a few steps, reward at the end). A task's own entry is read over
#: them by :func:`train`.
DEFAULT_HYPERPARAMS: dict[str, dict[str, Any]] = {algo: tuned(algo).hyperparams for algo in ALGOS}


# -- envs -------------------------------------------------------------------------------------


def make_harness_env(env_id: str, harness: Harness | str | Mapping[str, Any] | Path | None = None) -> gym.Env:
    """``gym.make(env_id)``, with the registered harness replaced when ``harness`` is given."""
    if harness is None:
        return gym.make(env_id)
    return gym.make(env_id, harness=resolve_harness(harness))


def default_features(max_actions: int = DEFAULT_MAX_ACTIONS) -> HashedFeatures:
    """The baselines' encoding: the observation's hashed features and the menu's (all K slots).

    Without the menu an MLP cannot tell which slot types the word the instruction quotes (the
    slot order is shuffled per episode), so it can only guess and check: 51% on EnterText
    after 60k MaskablePPO steps, against 99% with the menu (docs/training.md).
    """
    return HashedFeatures(menu_slots=max_actions)


def adapt(
    env: gym.Env,
    max_actions: int = DEFAULT_MAX_ACTIONS,
    features: HashedFeatures | None = None,
    compact_info: bool = True,
) -> gym.Env:
    """The view SB3 trains on: ``TextEncoder(DiscreteActions(env, max_actions), features)``.

    ``features`` defaults to :func:`default_features`. ``compact_info`` drops the per-episode
    constants from ``info`` (see :class:`CompactInfo`).
    """
    if compact_info:
        env = CompactInfo(env)
    return TextEncoder(DiscreteActions(env, max_actions), features or default_features(max_actions))


class CompactInfo(gym.Wrapper):
    """Drop ``harness``, ``tools`` and ``system_prompt`` from ``info``: constants of the env.

    SB3's vector envs deep-copy every ``info`` on every step; these three are the bulk of it and
    never change within an env. ``harness_id`` stays in ``info``, and the spec itself stays at
    ``env.unwrapped.harness`` (and is saved with every model), so each step stays attributable.
    """

    DROPPED = ("harness", "tools", "system_prompt")

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        return observation, self._compact(info)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, self._compact(info)

    def _compact(self, info: dict[str, Any]) -> dict[str, Any]:
        for key in self.DROPPED:
            info.pop(key, None)
        return info


# -- progress -------------------------------------------------------------------------------


class TqdmCallback(BaseCallback):
    """A plain tqdm progress bar over training timesteps (SB3's own bar also needs ``rich``)."""

    def __init__(self, desc: str = "train") -> None:
        super().__init__()
        self.desc = desc
        self.bar: Any = None

    def _on_training_start(self) -> None:
        total = self.locals["total_timesteps"] - self.model.num_timesteps
        self.bar = progress_bar(total, self.desc, unit="step")

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(self.training_env.num_envs)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- the trained model ------------------------------------------------------------------------


@dataclass
class TrainedModel:
    """An SB3 model with the harness and adapter settings it was trained under."""

    model: BaseAlgorithm
    algo: str
    env_id: str
    task_id: str
    harness: Harness
    seed: int
    steps: int
    max_actions: int = DEFAULT_MAX_ACTIONS
    features: HashedFeatures = field(default_factory=default_features)
    hyperparams: dict[str, Any] = field(default_factory=dict)
    #: Where the hyperparameters' defaults came from (``<file>#<entry>``, :mod:`.tuned`).
    tuned_source: str = ""
    #: The training harnesses beside ``harness`` (:func:`train`'s ``also``).
    also: list[Harness] = field(default_factory=list)

    def predict_index(self, observation: str, legal_actions: list[str], deterministic: bool = True) -> int:
        """The menu index the model picks for a rendered observation and its legal actions."""
        x = self.features.encode(observation, legal_actions if self.features.menu_slots else None)
        if isinstance(self.model, MaskablePPO):
            mask = legal_mask(len(legal_actions), self.max_actions)
            action, _ = self.model.predict(x, deterministic=deterministic, action_masks=mask)
        else:
            action, _ = self.model.predict(x, deterministic=deterministic)
        return int(np.asarray(action).reshape(()))

    def agent(self, deterministic: bool = True) -> SB3Agent:
        return SB3Agent(self, deterministic)

    def run_info(self) -> dict[str, Any]:
        return {
            "algo": self.algo,
            "env_id": self.env_id,
            "task_id": self.task_id,
            "harness": self.harness.to_dict(),
            "harness_id": self.harness.id,
            "seed": self.seed,
            "steps": self.steps,
            "max_actions": self.max_actions,
            "features": self.features.to_dict(),
            "hyperparams": self.hyperparams,
            "tuned_source": self.tuned_source,
            "also_harnesses": [h.to_dict() for h in self.also],
            "versions": {
                "stable_baselines3": stable_baselines3.__version__,
                "torch": torch.__version__,
                "gymnasium": gym.__version__,
            },
        }

    def save(self, out_dir: str | Path) -> Path:
        """Write ``model.zip``, ``run.json`` and the harness spec into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save(out / "model.zip")
        (out / "run.json").write_text(json.dumps(self.run_info(), indent=2) + "\n")
        (out / "harness.json").write_text(self.harness.to_json() + "\n")
        try:
            (out / "harness.yaml").write_text(self.harness.to_yaml())
        except ImportError:
            pass
        return out

    @classmethod
    def load(cls, model_dir: str | Path) -> TrainedModel:
        """Load a directory written by :meth:`save`; the harness spec must match its recorded id."""
        path = Path(model_dir)
        run_file = path / "run.json"
        if not run_file.exists():
            raise FileNotFoundError(f"{path} is not a saved model directory (no run.json)")
        run = json.loads(run_file.read_text())
        algo = run["algo"]
        if algo not in ALGOS:
            raise ValueError(f"{path} holds a {algo!r} model; this loader handles {list(ALGOS)}")
        harness = Harness.from_dict(run["harness"])
        if harness.id != run["harness_id"]:
            raise ValueError(
                f"harness spec in {run_file} hashes to {harness.id}, but the run recorded {run['harness_id']}"
            )
        model = ALGOS[algo].load(path / "model.zip", device="cpu")
        return cls(
            model=model,
            algo=algo,
            env_id=run["env_id"],
            task_id=run["task_id"],
            harness=harness,
            seed=int(run["seed"]),
            steps=int(run["steps"]),
            max_actions=int(run["max_actions"]),
            features=HashedFeatures(**run["features"]),
            hyperparams=dict(run.get("hyperparams", {})),
            tuned_source=str(run.get("tuned_source", "")),
            also=[Harness.from_dict(h) for h in run.get("also_harnesses", [])],
        )


class SB3Agent:
    """The Agent protocol over a :class:`TrainedModel`: encode the text, pick a menu index.

    An index with no legal action behind it sends the empty string, as
    :class:`~harness_gym.wrappers.DiscreteActions` does, so the harness's invalid-action
    policy applies.
    """

    def __init__(self, trained: TrainedModel, deterministic: bool = True) -> None:
        self.trained = trained
        self.deterministic = deterministic
        self.name = trained.algo

    def reset(self, seed: int | None = None) -> None:
        # Sampling uses SB3's global RNGs; seeding them per episode makes stochastic runs replay.
        if seed is not None and not self.deterministic:
            self.trained.model.set_random_seed(seed)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        legal = list(info.get("legal_actions") or [])[: self.trained.max_actions]
        index = self.trained.predict_index(observation, legal, self.deterministic)
        return legal[index] if 0 <= index < len(legal) else INVALID_ACTION_TEXT


# -- train and evaluate -----------------------------------------------------------------------


def unknown_hyperparams(algo: str, hyperparams: Mapping[str, Any]) -> list[str]:
    """The keys of ``hyperparams`` that ``algo``'s SB3 constructor does not take (checked before
    any work: SB3 would raise only after the envs are built)."""
    import inspect

    taken = set(inspect.signature(ALGOS[algo].__init__).parameters) - {"self", "policy", "env"}
    return sorted(set(hyperparams) - taken)


def train(
    algo: str,
    env_id: str,
    steps: int,
    seed: int = 0,
    *,
    harness: Harness | str | Mapping[str, Any] | Path | None = None,
    also: Sequence[Harness | str | Mapping[str, Any] | Path] = (),
    max_actions: int = DEFAULT_MAX_ACTIONS,
    features: HashedFeatures | None = None,
    n_envs: int = 4,
    hyperparams: Mapping[str, Any] | None = None,
    progress: bool = False,
    verbose: int = 0,
    log: str | None = None,
    log_dir: str | Path | None = None,
) -> TrainedModel:
    """Train ``algo`` (``ppo``, ``maskable_ppo`` or ``dqn``) for ``steps`` env steps on ``env_id``.

    ``hyperparams`` are read over the tuned entry of the env's task
    (:func:`harness_gym.baselines.tuned.tuned`: the file's ``default`` where the task has
    none). ``harness`` replaces the env id's registered harness. ``also`` trains under more
    harnesses of the task beside it, balanced: the ``n_envs`` parallel envs take the training
    harnesses in turn (``n_envs`` must be a multiple of their number), so every rollout holds each
    harness equally often. Everything is seeded from ``seed``
    (torch, the SB3 model and the envs), so the same call gives the same model. ``log``
    (``tensorboard`` or ``wandb``, :mod:`harness_gym.logging_backends`) writes SB3's scalars
    (``rollout/ep_rew_mean``, ``train/loss``, ...) under ``log_dir``.
    """
    if algo not in ALGOS:
        raise ValueError(f"unknown algo {algo!r}; choose one of {list(ALGOS)}")
    check_backend(log)
    features = features or default_features(max_actions)
    probe = make_harness_env(env_id, harness)
    base = unwrap_harness_env(probe, "sb3.train")
    trained_harness, task_id = base.harness, base.task.task_id
    probe.close()
    entry = tuned(algo, task_id)
    params = {**entry.hyperparams, **dict(hyperparams or {})}
    harnesses = [trained_harness, *(resolve_harness(h) for h in also)]
    if n_envs % len(harnesses):
        raise ValueError(
            f"n_envs {n_envs} is not a multiple of the {len(harnesses)} training harnesses: each env "
            f"keeps one harness, so give n_envs {len(harnesses)} or {2 * len(harnesses)}"
        )
    built = itertools.count()  # make_vec_env builds its envs in rank order

    def factory() -> gym.Env:
        harness_i = harnesses[next(built) % len(harnesses)]
        return adapt(make_harness_env(env_id, harness_i), max_actions, features)

    torch.manual_seed(seed)
    venv = make_vec_env(factory, n_envs=n_envs, seed=seed)
    log_dir = Path(log_dir or "runs")
    tensorboard_log = str(log_dir) if log == "tensorboard" else None
    model = ALGOS[algo](
        "MlpPolicy", venv, seed=seed, verbose=verbose, device="cpu", tensorboard_log=tensorboard_log, **params
    )
    run_log = None
    if log == "wandb":
        run_log = open_log("wandb", log_dir, "sb3", f"{algo}-{task_id}-{trained_harness.id}", params)
        model.set_logger(sb3_logger(run_log))
    callback = TqdmCallback(f"train {algo}") if progress else None
    model.learn(total_timesteps=int(steps), callback=callback, tb_log_name=f"{algo}-{trained_harness.id}")
    venv.close()
    if run_log is not None:
        run_log.close()
    return TrainedModel(
        model=model,
        algo=algo,
        env_id=env_id,
        task_id=task_id,
        harness=trained_harness,
        seed=seed,
        steps=int(steps),
        max_actions=max_actions,
        features=features,
        hyperparams=params,
        tuned_source=entry.source,
        also=harnesses[1:],
    )


def load(model_dir: str | Path) -> TrainedModel:
    """Load a saved model directory (see :meth:`TrainedModel.load`)."""
    return TrainedModel.load(model_dir)


def evaluate(
    trained: TrainedModel,
    env_id: str | None = None,
    *,
    harness: Harness | str | Mapping[str, Any] | Path | None = None,
    episodes: int = 100,
    seed: int = 0,
    deterministic: bool = True,
    progress: bool = False,
    record: bool = False,
) -> list[EpisodeResult]:
    """Play ``episodes`` episodes (seeds ``seed, seed+1, ...``) of ``env_id`` under any harness.

    ``env_id`` defaults to the training env; ``harness`` replaces its registered harness.
    Rows record the harness played, and ``extra`` records the harness the model was trained under;
    with ``record`` each row carries its trajectory (:mod:`harness_gym.rollout.trajectory`).
    """
    env = make_harness_env(env_id or trained.env_id, harness)
    task_id = unwrap_harness_env(env, "sb3.evaluate").task.task_id
    if task_id != trained.task_id:
        raise ValueError(f"the model was trained on task {trained.task_id!r}; {env_id!r} is task {task_id!r}")
    agent = trained.agent(deterministic)
    results = []
    for s in progress_iter(range(seed, seed + episodes), episodes, f"eval {trained.algo}", enabled=progress):
        row = run_episode(env, agent, s, trained.algo, record=record)
        row.extra = {"trained_harness_id": trained.harness.id, "trained_env_id": trained.env_id}
        results.append(row)
    env.close()
    return results
