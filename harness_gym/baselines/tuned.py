"""Tuned hyperparameters per (trainer, task), one YAML file per trainer (rl-baselines3-zoo style).

Each file in ``harness_gym/baselines/hyperparams/`` (``maskable_ppo.yaml``, ``text_policy.yaml``,
...) maps a task id to an entry; ``default`` is the entry of every task the file does not name,
and a task's entry is read over it (its ``hyperparams`` merged key by key)::

    default:
      steps: 20000          # the trainer's budget: env steps (SB3), iterations (text policy)
      hyperparams: {learning_rate: 0.003}
    ClickTab:
      steps: 100000
      note: why these values (what was tried)

``harness-gym train`` trains with the entry of its env's task unless an option says otherwise
(``--steps``, ``--hyperparams`` override it key by key) and records where the values came from
(:attr:`Tuned.source`) in the run's ``run.json``; ``experiments/zoo.py`` trains with the same
entries and writes the results table, docs/zoo.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

#: Trainers with a file here (the ``--algo`` names of ``harness-gym train``).
TRAINERS = ("maskable_ppo", "ppo", "dqn", "text_policy", "sft-lm", "grpo-lm")
#: Keys an entry may hold.
ENTRY_KEYS = ("steps", "n_envs", "hyperparams", "note")
DEFAULT = "default"
#: The files' folder, beside this module (package data).
FOLDER = "hyperparams"


class HyperparamsError(ValueError):
    """A hyperparameter file or a request for one that cannot be read."""


@dataclass(frozen=True)
class Tuned:
    """The entry a trainer uses on a task: the budget and the trainer's keyword arguments."""

    trainer: str
    task_id: str
    #: The entry read over ``default``: the task's own name, or ``default`` when the file has none.
    entry: str
    steps: int | None = None
    n_envs: int | None = None
    hyperparams: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def source(self) -> str:
        """Where the values come from, as recorded in a run: ``<file>#<entry>``."""
        return f"harness_gym/baselines/{FOLDER}/{file_name(self.trainer)}#{self.entry}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "steps": self.steps,
            "n_envs": self.n_envs,
            "hyperparams": dict(self.hyperparams),
        }


def file_name(trainer: str) -> str:
    return f"{trainer.replace('-', '_')}.yaml"


@cache
def _entries(trainer: str) -> dict[str, dict[str, Any]]:
    if trainer not in TRAINERS:
        raise HyperparamsError(
            f"no hyperparameter file for trainer {trainer!r}; trainers: {', '.join(TRAINERS)}"
        )
    try:
        import yaml
    except ImportError as err:  # pragma: no cover - the rl and cli extras bring PyYAML
        raise HyperparamsError("tuned hyperparameters need PyYAML: pip install 'harness-gym[rl]'") from err
    folder = resources.files("harness_gym.baselines").joinpath(FOLDER)
    text = folder.joinpath(file_name(trainer)).read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise HyperparamsError(
            f"{file_name(trainer)}: a mapping of task ids to entries, got {type(data).__name__}"
        )
    for name, entry in data.items():
        check_entry(f"{file_name(trainer)}#{name}", entry)
    return data


def check_entry(where: str, entry: Any) -> None:
    """Refuse an entry with an unknown key or a value of the wrong type (one line naming it)."""
    if not isinstance(entry, Mapping):
        raise HyperparamsError(f"{where}: an entry is a mapping, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise HyperparamsError(
            f"{where}: unknown key(s) {', '.join(unknown)}; an entry takes {', '.join(ENTRY_KEYS)}"
        )
    for key in ("steps", "n_envs"):
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise HyperparamsError(f"{where}: {key} must be a positive integer, got {value!r}")
    if not isinstance(entry.get("hyperparams", {}), Mapping):
        raise HyperparamsError(f"{where}: hyperparams must be a mapping")


def tuned(trainer: str, task_id: str | None = None) -> Tuned:
    """The entry ``trainer`` uses on ``task_id`` (``None``: the file's ``default``)."""
    entries = _entries(trainer)
    base = dict(entries.get(DEFAULT) or {})
    name = task_id if task_id in entries else DEFAULT
    own = dict(entries.get(name) or {}) if name != DEFAULT else {}
    merged = {**base, **own}
    merged["hyperparams"] = {**dict(base.get("hyperparams") or {}), **dict(own.get("hyperparams") or {})}
    return Tuned(
        trainer=trainer,
        task_id=task_id or DEFAULT,
        entry=name,
        steps=merged.get("steps"),
        n_envs=merged.get("n_envs"),
        hyperparams=merged["hyperparams"],
        note=str(merged.get("note") or "") if name != DEFAULT else "",
    )


def tasks_with_entries(trainer: str) -> list[str]:
    """The task ids ``trainer``'s file tunes (besides ``default``)."""
    return [name for name in _entries(trainer) if name != DEFAULT]
