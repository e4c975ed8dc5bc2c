"""Stored trajectories out: ATIF (Harbor's Agent Trajectory Interchange Format) and the chat
transcripts ``harness-gym export`` writes.

ATIF follows Harbor's RFC ``docs/rfcs/0001-trajectory-format.md`` (v1.4; the format Harbor's
trajectory viewer reads): a root object with ``schema_version``, ``session_id``, ``agent``
(``name``, ``version``, ``model_name``), ``steps`` and ``final_metrics``. Here step 1 is the
system prompt (``source: system``), step 2 the first observation (``source: user``), and each
env step an agent step: ``message`` the raw reply, ``tool_calls`` the parsed canonical action
(none when the parser refused the reply), ``observation.results[0].content`` the observation
that came back, ``metrics`` the tokens, and ``extra`` the reward, parse status, error, state
digest and latency. The episode's task, harness, seed and outcome are in the root ``extra``.

The chat transcripts are rebuilt from the stored steps by the same code as ``export``
(:func:`harness_gym.integrations.export.episode_rows`), on an env built from the row's harness.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from harness_gym.rows.trajectories import read_trajectories

ATIF_VERSION = "ATIF-v1.4"
FORMATS = ("atif", "chat")


def to_atif(record: Mapping[str, Any], model: str | None = None) -> dict[str, Any]:
    """One stored trajectory record (:mod:`harness_gym.rows.trajectories`) as an ATIF object."""
    import harness_gym

    trajectory = record["trajectory"]
    steps: list[dict[str, Any]] = [
        {"step_id": 1, "source": "system", "message": trajectory.get("system_prompt") or ""},
        {"step_id": 2, "source": "user", "message": trajectory.get("observation") or ""},
    ]
    recorded = trajectory.get("steps", [])
    prompt = completion = 0
    for k, step in enumerate(recorded):
        last = k + 1 == len(recorded)
        after = trajectory.get("final_observation") if last else recorded[k + 1]["observation"]
        call_id = f"call_{k + 1}"
        out: dict[str, Any] = {
            "step_id": len(steps) + 1,
            "source": "agent",
            "message": step.get("reply") or "",
        }
        if step.get("call"):
            out["tool_calls"] = [
                {
                    "tool_call_id": call_id,
                    "function_name": step["call"]["name"],
                    "arguments": dict(step["call"]["arguments"]),
                }
            ]
        if step.get("reasoning"):
            out["reasoning_content"] = step["reasoning"]
        result: dict[str, Any] = {"content": after or ""}
        if "tool_calls" in out:
            result["source_call_id"] = call_id
        out["observation"] = {"results": [result]}
        metrics = {k: step[k] for k in ("prompt_tokens", "completion_tokens") if step.get(k) is not None}
        prompt += int(step.get("prompt_tokens") or 0)
        completion += int(step.get("completion_tokens") or 0)
        if metrics:
            out["metrics"] = metrics
        out["extra"] = {
            k: step.get(k)
            for k in ("action", "reward", "parse_status", "error", "state_digest", "latency", "truncated")
            if step.get(k) is not None
        }
        steps.append(out)
    return {
        "schema_version": ATIF_VERSION,
        "session_id": "-".join(str(record.get(k)) for k in ("task_id", "harness_id", "seed", "index")),
        "agent": {
            "name": str(record.get("agent")),
            "version": harness_gym.__version__,
            **({"model_name": model} if model else {}),
        },
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": prompt,
            "total_completion_tokens": completion,
            "total_steps": len(recorded),
        },
        "extra": {
            **{k: record.get(k) for k in ("index", "task_id", "harness_name", "harness_id", "seed")},
            "success": trajectory.get("success"),
            "episode_return": trajectory.get("episode_return"),
            "state_digest": trajectory.get("state_digest"),
        },
    }


def chat_rows(
    record: Mapping[str, Any], harness: Mapping[str, Any], unit: str = "episode"
) -> list[dict[str, Any]]:
    """One stored trajectory as ``export``'s chat rows (rendered by the row's harness)."""
    from harness_gym.core.harness import Harness
    from harness_gym.core.registry import make_env
    from harness_gym.integrations.export import RecordedEpisode, RecordedStep, episode_rows
    from harness_gym.rollout import EpisodeResult

    trajectory = record["trajectory"]
    env = make_env(str(record["task_id"]), Harness.from_dict(dict(harness)))
    try:
        _, info = env.reset(seed=int(record["seed"]))
        steps = trajectory.get("steps", [])
        result = EpisodeResult(
            task_id=str(record["task_id"]),
            harness_id=str(record["harness_id"]),
            harness=dict(harness),
            seed=int(record["seed"]),
            agent=str(record["agent"]),
            episode_return=float(trajectory.get("episode_return") or 0.0),
            success=bool(trajectory.get("success")),
            steps=len(steps),
            invalid_actions=sum(bool(s.get("invalid")) for s in steps),
            wall_time=0.0,
        )
        episode = RecordedEpisode(
            result=result,
            system_prompt=trajectory.get("system_prompt") or info["system_prompt"],
            examples=list(info.get("examples") or []),
            steps=[RecordedStep(s["observation"], s["action"], float(s["reward"]), {}) for s in steps],
            final_observation=trajectory.get("final_observation") or "",
        )
        return episode_rows(env, episode, unit)
    finally:
        env.close()


def export_trajectories(
    run_dir: str | Path,
    path: str | Path,
    fmt: str = "atif",
    unit: str = "episode",
    indices: Iterable[int] | None = None,
) -> int:
    """Write a run's stored trajectories as JSON Lines (one ATIF object, or one chat row, a
    line); return how many lines."""
    if fmt not in FORMATS:
        raise ValueError(f"trajectory export format must be one of {FORMATS}, got {fmt!r}")
    records = read_trajectories(run_dir, indices)
    harnesses = _harnesses(Path(run_dir)) if fmt == "chat" else {}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for line in _lines(records, harnesses, fmt, unit):
            fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            n += 1
    return n


def _lines(
    records: Mapping[int, Mapping[str, Any]], harnesses: Mapping[str, Any], fmt: str, unit: str
) -> Iterator[dict[str, Any]]:
    for index in sorted(records):
        record = records[index]
        if fmt == "atif":
            yield to_atif(record)
        else:
            yield from chat_rows(record, harnesses[str(record["harness_id"])], unit)


def _harnesses(run_dir: Path) -> dict[str, Any]:
    """Harness id -> spec, from the run's ``sweep.json``."""
    from harness_gym.analysis.sweep import read_meta

    meta = read_meta(run_dir)
    return {h["id"]: h["spec"] for h in meta.get("harness_specs", []) if "spec" in h}
