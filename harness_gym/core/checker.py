"""check_harness: does a harness keep the contract on a task? In the spirit of ``check_env``.

It checks, over a few seeds:

- ``schema``: every tool schema (OpenAI and Anthropic shapes) is valid JSON Schema, and the
  arguments of every legal action validate against it (uses the ``jsonschema`` package);
- ``round_trip``: ``parse(format_action(a)) == a`` for every legal action along oracle and
  random trajectories; an action whose text is longer than ``max_action_chars`` is counted
  as ``inexpressible`` instead (the harness limits what can be written, as a dropped tool
  does), which is also what the ceiling search leaves out;
- ``determinism``: the same seed renders the same observations, legal actions and prompt;
- ``pairing``: the task instance (state digest) is the one the canonical harness gets;
- ``oracle``: for a pure-presentation harness (no dropped tool, budget not cut, every legal
  action met expressible), the oracle succeeds on exactly the seeds where it succeeds under
  the canonical harness.

Every failure names the check, what went wrong, and the factor levels involved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from harness_gym.core.env import HarnessEnv, unwrap_harness_env
from harness_gym.core.harness import Harness, HarnessSpecError
from harness_gym.core.task import Task
from harness_gym.core.tools import ActionError

#: Factors that bear on each check, so a failure reports the levels that matter.
CHECK_FACTORS: dict[str, tuple[str, ...]] = {
    "bind": tuple(Harness.factor_names()),
    "schema": ("tool_style", "tool_naming", "rename_tools", "rename_args", "tool_descriptions", "drop_tools"),
    "round_trip": ("tool_style", "tool_naming", "rename_tools", "rename_args", "parser", "max_action_chars"),
    "determinism": tuple(Harness.factor_names()),
    "pairing": tuple(Harness.factor_names()),
    "oracle": tuple(Harness.factor_names()),
}


@dataclass
class CheckFailure:
    check: str
    message: str
    levels: dict[str, Any]

    def __str__(self) -> str:
        levels = " ".join(f"{k}={v}" for k, v in self.levels.items()) or "canonical levels"
        return f"[{self.check}] {self.message} (levels: {levels})"


@dataclass
class HarnessReport:
    """The outcome of :func:`check_harness` for one (task, harness)."""

    task_id: str
    harness: Harness
    failures: list[CheckFailure] = field(default_factory=list)
    checks: dict[str, int] = field(default_factory=dict)
    #: Legal actions the harness cannot express (text longer than ``max_action_chars``).
    inexpressible: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def fail(self, check: str, message: str) -> None:
        diff = self.harness.to_dict(full=False)
        levels = {k: diff[k] for k in CHECK_FACTORS[check] if k in diff}
        self.failures.append(CheckFailure(check, message, levels))

    def __str__(self) -> str:
        head = f"{self.task_id} x {self.harness.id} ({self.harness.describe()}): "
        ran = ", ".join(f"{k}={v}" for k, v in self.checks.items())
        if self.ok:
            return head + f"ok ({ran})" + "".join(f"\n  note: {n}" for n in self.notes)
        return (
            head + f"{len(self.failures)} failure(s) ({ran})\n" + "\n".join(f"  {f}" for f in self.failures)
        )


class HarnessCheckError(AssertionError):
    """Raised by :func:`check_harness` when a check fails; carries the report."""

    def __init__(self, report: HarnessReport) -> None:
        super().__init__(str(report))
        self.report = report


def is_pure_presentation(harness: Harness, task: type[Task] | Task) -> bool:
    """True when the harness cannot change the ceiling: no dropped tool, budget not cut."""
    return not harness.drop_tools and (harness.step_budget is None or harness.step_budget >= task.max_steps)


def check_harness(
    env_or_harness: gym.Env | Harness | Any,
    task: str | type[Task] | None = None,
    seeds: Iterable[int] = range(8),
    raise_on_failure: bool = True,
) -> HarnessReport:
    """Check one harness on one task; raise :class:`HarnessCheckError` listing every failure.

    Args:
        env_or_harness: a HarnessEnv (possibly wrapped) or anything ``make_env`` takes as a
            harness (a Harness, preset name, dict or YAML path).
        task: the task id or class; required unless an env is given.
        seeds: the task seeds to check on.
        raise_on_failure: return the report instead of raising.
    """
    from harness_gym.core.registry import get_task

    if isinstance(env_or_harness, gym.Env):
        base = unwrap_harness_env(env_or_harness, "check_harness")
        task_cls: type[Task] = type(base.task)
        harness = base.harness
    else:
        if task is None:
            raise TypeError("check_harness(harness, task): pass the task id or class with a harness")
        task_cls = get_task(task) if isinstance(task, str) else task
        from harness_gym.core.presets import resolve_harness

        harness = resolve_harness(env_or_harness)
    seeds = list(seeds)
    report = HarnessReport(task_cls.task_id, harness)
    try:
        env = HarnessEnv(task_cls, harness)
    except HarnessSpecError as err:
        report.fail("bind", str(err))
        return _finish(report, raise_on_failure)
    canonical = HarnessEnv(task_cls, Harness())
    _check_schema(env, report)
    pure = is_pure_presentation(harness, task_cls)
    for seed in seeds:
        _check_episode(env, canonical, seed, report, compare_oracle=pure)
    if report.inexpressible:
        report.notes.append(
            f"{len(report.inexpressible)} legal action(s) cannot be written within "
            f"max_action_chars={harness.max_action_chars}, e.g. {report.inexpressible[0]}; "
            "they are out of every policy's reach and the ceiling leaves them out"
        )
    return _finish(report, raise_on_failure)


def _finish(report: HarnessReport, raise_on_failure: bool) -> HarnessReport:
    if raise_on_failure and not report.ok:
        raise HarnessCheckError(report)
    return report


def _count(report: HarnessReport, check: str, n: int = 1) -> None:
    report.checks[check] = report.checks.get(check, 0) + n


def _check_schema(env: HarnessEnv, report: HarnessReport) -> None:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("check_harness needs jsonschema: pip install 'harness-gym[check]'") from None
    toolbox = env.bound.toolbox
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in toolbox.openai_tools()}
    for tool in toolbox.anthropic_tools():
        if tool["input_schema"] != schemas.get(tool["name"]):
            report.fail("schema", f"Anthropic and OpenAI schemas of tool {tool['name']!r} differ")
    for name, schema in schemas.items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as err:
            report.fail("schema", f"tool {name!r} has an invalid JSON Schema: {err.message}")
        _count(report, "schema")
    env.reset(seed=0)
    for action in env.legal_actions():
        tool = next(t for t in toolbox.tools if t.spec.name == action.name)
        args = {shown: action[p.name] for shown, p in zip(tool.arg_names, tool.params, strict=True)}
        errors = list(jsonschema.Draft202012Validator(schemas[tool.name]).iter_errors(args))
        if errors:
            report.fail("schema", f"legal action {action} does not validate: {errors[0].message}")
        _count(report, "schema")


def _check_episode(
    env: HarnessEnv, canonical: HarnessEnv, seed: int, report: HarnessReport, compare_oracle: bool
) -> None:
    before = len(report.inexpressible)
    runs = [_play(env, seed, report) for _ in range(2)]
    # A harness that cannot express an action met on this seed limits the agent, like a
    # dropped tool: the oracle may then fail here, and the ceiling says so too.
    compare_oracle = compare_oracle and len(report.inexpressible) == before
    _count(report, "determinism")
    if runs[0] != runs[1]:
        report.fail("determinism", f"seed {seed}: two runs rendered different episodes")
    obs, info = canonical.reset(seed=seed)
    _count(report, "pairing")
    if info["state_digest"] != runs[0]["digest"]:
        report.fail("pairing", f"seed {seed}: the task instance differs from the canonical harness's")
    if compare_oracle:
        _count(report, "oracle")
        reference = _play(canonical, seed, None)["success"]
        if runs[0]["success"] != reference:
            report.fail(
                "oracle",
                f"seed {seed}: oracle success {runs[0]['success']} here but {reference} under the "
                "canonical harness, although this harness only changes presentation",
            )


def _play(env: HarnessEnv, seed: int, report: HarnessReport | None) -> dict[str, Any]:
    """Play the oracle from ``seed``; check round trips of every legal action on the way."""
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    record: dict[str, Any] = {
        "digest": info["state_digest"],
        "prompt": info["system_prompt"],
        "observations": [obs],
        "legal": [info["legal_actions"]],
    }
    done = False
    while not done:
        if report is not None:
            _check_round_trips(env, report)
            # Also from a state off the oracle's path: one random legal action, then undo it.
            legal = env.legal_actions()
            if legal and rng.random() < 0.3:
                snap = env.task.snapshot()
                env.task.step(legal[int(rng.integers(len(legal)))])
                _check_round_trips(env, report)
                env.task.restore(snap)
        obs, _, terminated, truncated, info = env.step(env.oracle_action())
        record["observations"].append(obs)
        record["legal"].append(info["legal_actions"])
        done = terminated or truncated
    record["success"] = info["success"]
    return record


def _check_round_trips(env: HarnessEnv, report: HarnessReport) -> None:
    """Every exposed legal action must round-trip, or be too long for ``max_action_chars``.

    Also checks that the env's legal actions are exactly the ones that round-trip, the set
    the ceiling search plans over.
    """
    legal = set(env.legal_actions())
    for action in env.task.legal_actions():
        if not env.bound.exposes(action):
            continue
        _count(report, "round_trip")
        text = env.format_action(action)
        ok = False
        try:
            back = env.bound.parse(text)
        except ActionError as err:
            if err.kind == "too_long":
                _count(report, "inexpressible")
                if str(action) not in report.inexpressible:
                    report.inexpressible.append(str(action))
            else:
                report.fail("round_trip", f"{action} written as {text!r} does not parse: {err}")
        except Exception as err:  # noqa: BLE001 - any failure here is a finding
            report.fail("round_trip", f"{action} written as {text!r} raises {type(err).__name__}: {err}")
        else:
            ok = back == action
            if not ok:
                report.fail("round_trip", f"{action} written as {text!r} parses back as {back}")
        if ok != (action in legal):
            report.fail(
                "round_trip",
                f"{action} {'round-trips' if ok else 'does not round-trip'} but the env "
                f"{'omits it from' if ok else 'lists it in'} its legal actions",
            )
