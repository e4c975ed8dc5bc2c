"""Recording what an episode looked like to the agent, step by step, where it is played.

A :class:`Recorder` is made at ``reset`` and fed each step by the runner
(:func:`~harness_gym.rollout.episode.run_episode`, :func:`~harness_gym.rollout.batched.run_batched`)
only when a trajectory is asked for, so an unrecorded episode pays nothing. Each step keeps the
observation the agent saw, its raw reply (for a language-model agent: the chat messages it was
sent and the completion, from its ``step_record()``), the action text sent to the env, the parsed
action or the parse failure with its kind (:mod:`harness_gym.core.parse_status`), the reward,
the invalid / truncated flags, tokens and latency, and the task state's digest after the step.
A browser env's screenshot (``info["screenshot"]``, PNG bytes) is kept for the store to write
as a file (:mod:`harness_gym.rows.trajectories`).

:func:`count_parse` is the one per-step counter the runners always call (a dict lookup).
"""

from __future__ import annotations

from typing import Any

from harness_gym.core.parse_status import parse_status


def count_parse(counts: dict[str, int], info: dict[str, Any]) -> None:
    """Count a step's parse failure (if any) from its ``info``; ``ok`` is derived from the steps."""
    kind = info.get("error_kind")
    if kind is not None:
        status = parse_status(kind, info.get("last_error"))
        if status != "ok":
            counts[status] = counts.get(status, 0) + 1


def parse_counts(failed: dict[str, int], steps: int, truncated: int = 0) -> dict[str, int]:
    """An episode's parse status counts: ``ok`` plus the failures by kind (cut replies as
    ``truncated``, not ``empty``)."""
    from harness_gym.core.parse_status import mark_truncated

    counts = mark_truncated(dict(failed), truncated)
    ok = max(0, int(steps) - sum(counts.values()))
    return {"ok": ok, **counts} if ok else counts


class Recorder:
    """One episode's trajectory, built step by step."""

    def __init__(self, env: Any, observation: str, info: dict[str, Any]) -> None:
        from harness_gym.core.env import unwrap_harness_env

        try:
            self.core = unwrap_harness_env(env, "the trajectory recorder")
        except Exception:  # noqa: BLE001 - a plain gym env: no parser, no digest per step
            self.core = None
        self.steps: list[dict[str, Any]] = []
        self.start: dict[str, Any] = {
            "observation": observation,
            "state_digest": info.get("state_digest"),
            "system_prompt": info.get("system_prompt"),
        }
        self._screenshot(self.start, info)
        self._before = observation

    def step(
        self,
        agent: Any,
        action: str,
        observation: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        """Record one step: ``observation`` and ``info`` are what ``env.step(action)`` returned."""
        kind = info.get("error_kind")
        error = info.get("last_error")
        status = parse_status(kind, error)
        step: dict[str, Any] = {
            "t": len(self.steps) + 1,
            "observation": self._before,
            "reply": action,
            "action": action,
            "parsed": None,
            "parse_status": status,
            "error_kind": kind,
            "error": error,
            "invalid": kind is not None,
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        }
        if kind is None or status == "ok":
            parsed = self._parsed(action)
            if parsed is not None:
                step["parsed"] = str(parsed)
                step["call"] = {"name": parsed.name, "arguments": parsed.kwargs}
        record = getattr(agent, "step_record", None)
        if callable(record):
            extra = record()
            if extra:
                step.update(extra)
                if extra.get("cut") and status == "empty":
                    step["parse_status"] = "truncated"
        if self.core is not None:
            try:
                step["state_digest"] = self.core.task.digest()
            except Exception:  # noqa: BLE001 - a task whose state does not hash: no digest
                step["state_digest"] = None
        self._screenshot(step, info)
        self.steps.append(step)
        self._before = observation

    def finish(self, info: dict[str, Any], episode_return: float) -> dict[str, Any]:
        """The trajectory, once the episode has ended with ``info``."""
        return {
            **self.start,
            "steps": self.steps,
            "final_observation": self._before,
            "success": bool(info.get("success")),
            "episode_return": float(episode_return),
        }

    def _parsed(self, action: str) -> Any:
        if self.core is None:
            return None
        try:
            return self.core.bound.parse_cached(action)
        except Exception:  # noqa: BLE001 - recorded as unparsed, never raised
            return None

    @staticmethod
    def _screenshot(target: dict[str, Any], info: dict[str, Any]) -> None:
        png = info.get("screenshot")
        if isinstance(png, (bytes, bytearray)) and png:
            target["screenshot_png"] = bytes(png)
