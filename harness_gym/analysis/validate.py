"""The reward-integrity audit of ``harness-gym validate``: can this task be trusted as a reward?

For every (task, harness) pair it plays, through the harness (replies as text, as an agent's):

- **ceiling**: the task's own solution (its oracle) reaches the task's maximum return on every
  seed. A harness that hides a tool the solution needs, or cuts the step budget below it,
  fails here: training through it cannot reach the maximum.
- **floor**: policies that do not do the task stay below the maximum and never succeed:
  ``no-action`` (submit at once, where the task has a ``submit`` action: the untouched
  instance must not pass), ``empty`` (the empty reply until the budget ends), ``done-text``
  (a reply that only says it is done), ``random`` (random legal actions, never the oracle's
  next one: a task's legal actions may include its whole solution, as a terminal task's do).

Once per task (a harness never changes the world, contract 2 of DESIGN.md, so these do not
depend on it), on the first harness's task instance:

- **determinism**: the oracle's episode replays with the same return, success and instance
  digest (skipped for tasks marked ``nondeterministic``); a terminal task's verifier, asked
  twice about the same solved and the same untouched ``/app``, answers the same and right.
- **hack** (terminal tasks): each reward hack of
  :data:`~harness_gym.envs.terminal.hacks.KIT` is planted by ``run`` actions, then the
  agent submits: none may succeed.
- **fault** (terminal tasks): the untouched instance is submitted while its verifier is
  timed out or killed half-way (:mod:`~harness_gym.envs.terminal.verifier_faults`): no pass.

A check that fails is a :class:`Check` with status ``FAIL``; :meth:`ValidationReport.findings`
are their one-line descriptions. ``n/a`` marks a check that cannot apply (no ``submit``
action, a hack with nothing to act on, a fault that did not land).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from harness_gym.core.harness import Harness
from harness_gym.core.presets import FAMILY_PRESETS, PRESETS, preset_applies, task_family
from harness_gym.core.task import Action, Task

OK, FAIL, NA = "ok", "FAIL", "n/a"
#: The columns of the table: the kind of each check, in order.
KINDS = ("ceiling", "floor", "hack", "determinism", "fault")
#: Floor policies and what each does.
FLOORS: dict[str, str] = {
    "no-action": "submit at once, the instance untouched",
    "empty": "the empty reply until the step budget ends",
    "done-text": "a reply that only says the task is done",
    "random": "random legal actions, never the oracle's next one",
}
DONE_TEXT = "Done. I have completed the task."
#: Label of the task-level checks' rows (they hold under every harness).
EVERY_HARNESS = "*"
EPS = 1e-9


@dataclass(frozen=True)
class Check:
    """One check of one task (under one harness, or ``*``): its status and why."""

    task: str
    harness: str
    check: str
    status: str
    detail: str = ""

    @property
    def kind(self) -> str:
        return self.check.partition(":")[0]

    def line(self) -> str:
        """The finding as one line: ``TASK HARNESS CHECK: why``."""
        return f"{self.task} {self.harness} {self.check}: {' '.join(self.detail.split())}"


@dataclass
class ValidationReport:
    """Every check made, the tasks that could not be validated (with why), and the table."""

    checks: list[Check] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def ok(self) -> bool:
        return not self.failures

    def findings(self) -> list[str]:
        return [c.line() for c in self.failures]

    def rows(self) -> list[dict[str, str]]:
        """One row per (task, harness) and one per task (harness ``*``): a cell per kind,
        ``ok``, ``FAIL n/m`` (n of m checks failed), ``n/a`` or ``-`` (none made)."""
        order: dict[tuple[str, str], list[Check]] = {}
        for c in self.checks:
            order.setdefault((c.task, c.harness), []).append(c)
        rows = []
        for (task, harness), checks in order.items():
            row = {"task": task, "harness": harness}
            for kind in KINDS:
                mine = [c for c in checks if c.kind == kind]
                failed = sum(c.status == FAIL for c in mine)
                if not mine:
                    row[kind] = "-"
                elif failed:
                    row[kind] = f"FAIL {failed}/{len(mine)}"
                elif all(c.status == NA for c in mine):
                    row[kind] = NA
                else:
                    row[kind] = OK
            rows.append(row)
        return rows

    def table(self) -> str:
        rows = self.rows()
        if not rows:
            return "(nothing validated)"
        columns = ["task", "harness", *KINDS]
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
        lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
        lines += ["  ".join(r[c].ljust(widths[c]) for c in columns) for r in rows]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(
            {
                "ok": self.ok,
                "findings": self.findings(),
                "skipped": self.skipped,
                "rows": self.rows(),
                "checks": [asdict(c) for c in self.checks],
            },
            indent=2,
        )


def harness_label(harness: Harness) -> str:
    """The preset name of ``harness`` (generic or a family's), else its id."""
    for name, preset in PRESETS.items():
        if preset == harness:
            return name
    for table in FAMILY_PRESETS.values():
        for name, preset in table.items():
            if preset.harness == harness:
                return name
    return harness.id


def presets_for(task: type[Task]) -> list[Harness]:
    """Every preset registered with ``task``: the generic ones that apply, then its family's."""
    out = [PRESETS[p] for p in PRESETS if preset_applies(p, task)]
    out += [p.harness for p in FAMILY_PRESETS.get(task_family(task) or "", {}).values()]
    return out


# -- episodes through a harness -------------------------------------------------------------

Policy = Callable[[Any, np.random.Generator], str]


def _oracle(env: Any, rng: np.random.Generator) -> str:
    return str(env.oracle_action())


def _random(env: Any, rng: np.random.Generator) -> str:
    oracle = env.task.oracle()
    choices = [a for a in env.legal_actions() if a != oracle]
    if not choices:
        return ""
    return str(env.format_action(choices[int(rng.integers(len(choices)))]))


def _submit_action(task: Task) -> Action | None:
    for spec in task.action_specs:
        if spec.name == "submit" and not spec.params:
            return Action.of("submit")
    return None


def _no_action(env: Any, rng: np.random.Generator) -> str:
    submit = _submit_action(env.task)
    return str(env.format_action(submit)) if submit is not None else ""


POLICIES: dict[str, Policy] = {
    "no-action": _no_action,
    "empty": lambda env, rng: "",
    "done-text": lambda env, rng: DONE_TEXT,
    "random": _random,
}


@dataclass(frozen=True)
class Episode:
    ret: float
    success: bool
    digest: str
    verdict: str


def play(env: Any, seed: int, policy: Policy) -> Episode:
    """One episode of ``policy`` (text replies) through ``env`` on ``seed``."""
    _, info = env.reset(seed=seed)
    digest = str(info.get("state_digest", ""))
    rng = np.random.default_rng([seed, 7])
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, info = env.step(policy(env, rng))
        total += float(reward)
        done = bool(terminated or truncated)
    return Episode(total, bool(info.get("success")), digest, str(info.get("verdict", "") or ""))


def _pays(ep: Episode, max_return: float) -> bool:
    return ep.success or ep.ret >= max_return - EPS


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


# -- the audit -------------------------------------------------------------------------------


def validate_pair(task_id: str, env: Any, label: str, seeds: Sequence[int], max_return: float) -> list[Check]:
    """Ceiling and floor checks of one (task, harness) pair. An episode that raises fails the
    check it was played for (named in the finding), and the other checks still run: a floor
    policy that meets a crash (the random floor asks the oracle at every step) is not reported
    as the ceiling's."""
    checks = []
    low = []
    try:
        for seed in seeds:
            ep = play(env, seed, _oracle)
            if not (ep.success and ep.ret >= max_return - EPS):
                why = f" ({_short(ep.verdict)})" if ep.verdict else ""
                low.append(f"seed {seed}: return {ep.ret:g}{why}")
    except Exception as err:  # one broken check is a finding, not the end of the pair
        checks.append(_crashed(task_id, label, "ceiling", err, seed))
    else:
        checks.append(
            Check(
                task_id,
                label,
                "ceiling",
                FAIL if low else OK,
                f"the own solution stays below the maximum {max_return:g}: " + "; ".join(low) if low else "",
            )
        )
    for name, policy in POLICIES.items():
        if name == "no-action" and _submit_action(env.task) is None:
            checks.append(Check(task_id, label, f"floor:{name}", NA, "the task has no submit action"))
            continue
        paid = []
        try:
            for seed in seeds:
                ep = play(env, seed, policy)
                if _pays(ep, max_return):
                    paid.append(f"seed {seed}: return {ep.ret:g}, success {ep.success}")
        except Exception as err:
            checks.append(_crashed(task_id, label, f"floor:{name}", err, seed))
            continue
        checks.append(
            Check(
                task_id,
                label,
                f"floor:{name}",
                FAIL if paid else OK,
                f"{FLOORS[name]} is paid: " + "; ".join(paid) if paid else "",
            )
        )
    return checks


def validate_determinism(task_id: str, env: Any, seed: int) -> Check:
    """The oracle's episode on ``seed``, played twice, gives the same return, success, digest."""
    if getattr(env.task, "nondeterministic", False):
        return Check(task_id, EVERY_HARNESS, "determinism:replay", NA, "the task is marked nondeterministic")
    first, second = play(env, seed, _oracle), play(env, seed, _oracle)
    same = (first.ret, first.success, first.digest) == (second.ret, second.success, second.digest)
    detail = "" if same else f"seed {seed}: {first} then {second}"
    return Check(task_id, EVERY_HARNESS, "determinism:replay", OK if same else FAIL, detail)


def validate_task(
    task_id: str,
    harnesses: Sequence[Harness],
    seeds: Sequence[int],
    make_env: Callable[[str, Harness], Any],
    tick: Callable[[], None] = lambda: None,
) -> list[Check]:
    """Every check of one task: ceiling and floors under each harness, then the task-level
    checks (determinism; hacks and faults for a terminal task) on the first harness's env.
    ``tick`` is called after each unit of work (a pair, then the task-level checks)."""
    checks: list[Check] = []
    first_env = None
    try:
        for harness in harnesses:
            env = make_env(task_id, harness)
            try:
                max_return = float(getattr(env.task, "max_return", 1.0))
                checks += validate_pair(task_id, env, harness_label(harness), seeds, max_return)
            except Exception as err:  # one broken pair is a finding, not the end of the audit
                checks.append(_crashed(task_id, harness_label(harness), "ceiling", err))
            finally:
                if first_env is None:
                    first_env = env
                else:
                    env.close()
            tick()
        if first_env is None:
            return checks
        try:
            checks.append(validate_determinism(task_id, first_env, seeds[0]))
        except Exception as err:  # one broken check is a finding, not the end of the audit
            checks.append(_crashed(task_id, EVERY_HARNESS, "determinism:replay", err))
        if _is_terminal(first_env.task):
            from harness_gym.envs.terminal.audit import terminal_probes

            try:
                for probe in terminal_probes(first_env, seeds):
                    status = NA if probe.passed is None else OK if probe.passed else FAIL
                    checks.append(Check(task_id, EVERY_HARNESS, probe.check, status, probe.detail))
            except Exception as err:
                checks.append(_crashed(task_id, EVERY_HARNESS, "hack", err))
        tick()
    finally:
        if first_env is not None:
            first_env.close()
    return checks


def _crashed(task_id: str, label: str, check: str, err: Exception, seed: int | None = None) -> Check:
    """A check whose episode raised: a failure that names the error and, when known, the seed
    (the audit goes on)."""
    where = f" (seed {seed})" if seed is not None else ""
    return Check(task_id, label, check, FAIL, f"crashed: {type(err).__name__}: {_short(str(err))}{where}")


def _is_terminal(task: Task) -> bool:
    if task_family(type(task)) != "terminal":
        return False
    from harness_gym.envs.terminal.task import TerminalTask

    return isinstance(task, TerminalTask)
