"""Sweeps over multi-agent envs: one row per agent per episode.

:func:`run_multiagent_sweep` plays every (env, seed) cell with the given policies and
returns rows shaped like the single-agent sweep's (``task_id``, ``harness_id``, ``harness``,
``seed``, ``episode_return``, ``success``, ``steps``, ``invalid_actions``, ``error``) plus
``env_id``, ``agent``, ``policy``, ``channel_id``, ``channel`` and ``level_<factor>`` for each
channel factor (levels as text, as in the single-agent sweep), so the report tools can group
by agent, harness or channel level. With ``out_dir`` the rows are also written through the
row store (``episodes.jsonl``, ``episodes.parquet`` when pyarrow is installed, and a
``sweep.json`` naming the columns), so :func:`harness_gym.analysis.sweep.load_rows` reads
the folder. A cell whose policy raises records the error in every agent's row and the sweep
goes on.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness_gym.multiagent.pz import AECEnv, ParallelEnv
from harness_gym.rows import (
    ROWS_JSONL,
    ROWS_PARQUET,
    SWEEP_FILE,
    Column,
    register_columns,
    write_jsonl,
    write_table,
)

#: The columns multi-agent rows add to the sweep's (``task_id``, ``seed``, ``harness``, ...).
register_columns(
    Column("env_id", "str", "the multi-agent env's name in the sweep (multi-agent rows)"),
    Column("env_kind", "str", "the PettingZoo API: ParallelEnv or AECEnv (multi-agent rows)"),
    Column("policy", "str", "the name of the policies played (multi-agent rows)"),
    Column("channel_id", "str", "the content hash of the channel between agents (multi-agent rows)"),
    Column("channel", "json", "the channel's spec (multi-agent rows)"),
    Column("team_reward", "float", "the team's reward (multi-agent rows)"),
)
ROW_COLUMNS = (
    "env_id",
    "env_kind",
    "task_id",
    "agent",
    "policy",
    "harness_id",
    "harness",
    "channel_id",
    "channel",
    "seed",
    "episode_return",
    "success",
    "steps",
    "invalid_actions",
    "team_reward",
    "error",
    "wall_time",
)

Policy = Callable[[str, dict[str, Any]], str]
#: Builds one agent's policy for an env: ``(env, agent) -> policy``.
PolicyFactory = Callable[[Any, str], Policy]


def run_multiagent_sweep(
    envs: Mapping[str, Callable[[], Any]],
    policies: Mapping[str, PolicyFactory] | PolicyFactory,
    seeds: Sequence[int],
    out_dir: str | Path | None = None,
    policy_name: str = "scripted",
) -> list[dict[str, Any]]:
    """Play each env (name -> constructor) on each seed; return one row per agent per episode.

    ``policies`` maps agent names to policy factories, or is one factory for every agent.
    """
    if isinstance(seeds, int) or not all(isinstance(s, int) for s in seeds):
        raise TypeError(f"seeds must be a sequence of ints, got {seeds!r}")
    rows: list[dict[str, Any]] = []
    for env_name, make in envs.items():
        env = make()
        agents_policies = {a: _factory(policies, a)(env, a) for a in env.possible_agents}
        for seed in seeds:
            start = time.perf_counter()
            try:
                episode = _play(env, agents_policies, seed)
                error = None
            except Exception as err:  # noqa: BLE001 - the row records it and the sweep goes on
                episode, error = {}, f"{type(err).__name__}: {err}"[:500]
                traceback.clear_frames(err.__traceback__)
            wall = time.perf_counter() - start
            for agent in env.possible_agents:
                rows.append(_row(env_name, env, agent, seed, policy_name, episode.get(agent), error, wall))
        env.close()
    if out_dir is not None:
        _write(rows, Path(out_dir))
    return rows


def _factory(policies: Mapping[str, PolicyFactory] | PolicyFactory, agent: str) -> PolicyFactory:
    if callable(policies):
        return policies
    if agent not in policies:
        raise ValueError(f"no policy for agent {agent!r}; policies are given for {sorted(policies)}")
    return policies[agent]


def _play(env: Any, policies: Mapping[str, Policy], seed: int) -> dict[str, dict[str, Any]]:
    """One episode; per agent: return, turns and last info."""
    result = {a: {"return": 0.0, "steps": 0, "info": {}} for a in env.possible_agents}
    if isinstance(env, ParallelEnv):
        obs, infos = env.reset(seed=seed)
        for a, info in infos.items():
            result[a]["info"] = info
        while env.agents:
            actions = {a: policies[a](obs[a], infos[a]) for a in env.agents}
            obs, rewards, _, _, infos = env.step(actions)
            for a in actions:
                result[a]["return"] += float(rewards[a])
                result[a]["steps"] += 1
                result[a]["info"] = infos[a]
    elif isinstance(env, AECEnv):
        env.reset(seed=seed)
        for agent in env.agent_iter():
            obs, reward, term, trunc, info = env.last()
            result[agent]["return"] += float(reward)
            result[agent]["info"] = info
            if term or trunc:
                env.step(None)
                continue
            result[agent]["steps"] += 1
            env.step(policies[agent](obs, info))
    else:
        raise TypeError(f"a multi-agent sweep takes PettingZoo envs, got {type(env).__name__}")
    return result


def _row(
    env_name: str,
    env: Any,
    agent: str,
    seed: int,
    policy: str,
    episode: dict[str, Any] | None,
    error: str | None,
    wall: float,
) -> dict[str, Any]:
    info = (episode or {}).get("info", {})
    channel = info.get("channel") or {}
    row: dict[str, Any] = {
        "env_id": env_name,
        "env_kind": type(env).__name__,
        "task_id": info.get("task_id"),
        "agent": agent,
        "policy": policy,
        "harness_id": info.get("harness_id"),
        "harness": info.get("harness"),
        "channel_id": info.get("channel_id"),
        "channel": channel or None,
        "seed": seed,
        "episode_return": None if episode is None else float(episode["return"]),
        "success": None if episode is None else bool(info.get("success")),
        "steps": None if episode is None else episode["steps"],
        "invalid_actions": info.get("invalid_actions"),
        "team_reward": _number(info.get("team_reward", info.get("team_return"))),
        "error": error,
        "wall_time": wall,
    }
    row.update({f"level_{k}": _level(v) for k, v in channel.items()})
    return row


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _level(value: Any) -> str:
    """A channel level as the text a sweep's ``level_*`` column holds."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _write(rows: list[dict[str, Any]], out: Path) -> None:
    """Write the rows through the row store, with a ``sweep.json`` so ``load_rows`` reads them."""
    out.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys([*ROW_COLUMNS, *(k for r in rows for k in r)]))
    factors = [c[len("level_") :] for c in columns if c.startswith("level_")]
    stable = [{k: v for k, v in r.items() if k != "wall_time"} for r in rows]
    ident = hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()[:12]
    meta = {"sweep_id": f"ma-{ident}", "kind": "multiagent", "factors": factors, "columns": columns}
    write_jsonl(out / ROWS_JSONL, rows)
    try:
        write_table(rows, out / ROWS_PARQUET, columns)
    except ImportError:  # pragma: no cover - pyarrow absent
        pass
    (out / SWEEP_FILE).write_text(json.dumps(meta, indent=1))
