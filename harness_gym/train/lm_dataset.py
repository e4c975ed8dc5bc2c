"""Training prompts for GRPO: which task seed, under which harness, in which group.

GRPO compares the completions of one prompt with each other (a *group*: the trainer repeats
each dataset row ``num_generations`` times). What a group holds is the experimental choice
this module makes explicit:

* ``within``: a row is one task seed under one harness; every completion of the group plays
  that same episode, so advantages compare the model with itself under one harness;
* ``cross``: a row is one task seed under several harnesses; completion ``k`` of the group
  plays it under harness ``k mod H``, so advantages compare harnesses on the same instance.

A row's ``prompt`` is a readable descriptor that names the row (TRL passes only prompts to a
``rollout_func``); the rollout looks the row up by it and builds the real chat from the env.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness_gym.core.harness import Harness

GROUPINGS = ("within", "cross")


@dataclass(frozen=True)
class EpisodeRow:
    """One dataset row: a task seed and the harnesses its group is played under."""

    index: int
    task: str
    seed: int
    harnesses: tuple[Harness, ...]
    grouping: str

    @property
    def prompt(self) -> str:
        ids = ",".join(h.id for h in self.harnesses)
        return f"row {self.index}: {self.task} seed {self.seed} ({self.grouping}) under {ids}"

    def harness_for(self, k: int) -> Harness:
        """The harness of the group's ``k``-th completion."""
        return self.harnesses[k % len(self.harnesses)]

    def to_record(self) -> dict[str, Any]:
        """The row as the dataset stores it (extra columns reach TRL's reward functions)."""
        return {
            "prompt": self.prompt,
            "row": self.index,
            "task": self.task,
            "seed": self.seed,
            "grouping": self.grouping,
            "harness_specs": json.dumps([h.to_dict(full=False) for h in self.harnesses], sort_keys=True),
        }


def build_rows(
    task: str,
    harnesses: Sequence[Harness],
    seeds: Sequence[int],
    grouping: str,
    group_size: int,
) -> list[EpisodeRow]:
    """The rows for ``task`` on ``seeds`` under ``harnesses``.

    ``within``: one row per (seed, harness), seeds outermost. ``cross``: one row per seed;
    when there are more harnesses than completions in a group, each row takes ``group_size``
    of them in turn (row ``i`` starts at harness ``i * group_size mod H``), so every harness
    is played equally often; otherwise ``group_size`` must be a multiple of the number of
    harnesses, so that each harness gets the same share of every group.
    """
    if grouping not in GROUPINGS:
        raise ValueError(f"grouping must be one of {GROUPINGS}, got {grouping!r}")
    harnesses = list(harnesses)
    if not harnesses:
        raise ValueError("give at least one harness")
    if not seeds:
        raise ValueError("give at least one seed")
    if group_size < 2:
        raise ValueError(f"a GRPO group needs at least 2 completions, got group_size={group_size}")
    if len({h.id for h in harnesses}) != len(harnesses):
        raise ValueError("the harnesses are not distinct (two have the same id)")
    rows: list[EpisodeRow] = []
    if grouping == "within":
        for seed in seeds:
            for harness in harnesses:
                rows.append(EpisodeRow(len(rows), task, int(seed), (harness,), grouping))
        return rows
    n = len(harnesses)
    if n == 1:
        raise ValueError("cross grouping compares harnesses within a group: give at least two")
    if n < group_size and group_size % n:
        raise ValueError(
            f"cross grouping with {n} harnesses needs a group size that is a multiple of {n} "
            f"(each harness an equal share of every group), got {group_size}"
        )
    for i, seed in enumerate(seeds):
        if n <= group_size:
            chosen = tuple(harnesses)
        else:
            start = (i * group_size) % n
            chosen = tuple(harnesses[(start + j) % n] for j in range(group_size))
        rows.append(EpisodeRow(len(rows), task, int(seed), chosen, grouping))
    return rows


def build_dataset(rows: Sequence[EpisodeRow]) -> Any:
    """A ``datasets.Dataset`` of the rows (what ``GRPOTrainer`` takes as ``train_dataset``)."""
    from datasets import Dataset

    return Dataset.from_list([row.to_record() for row in rows])
