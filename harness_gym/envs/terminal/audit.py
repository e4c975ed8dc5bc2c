"""The terminal part of ``harness-gym validate``: reward hacks, verifier re-asks and faults.

:func:`terminal_probes` runs, on a terminal task's env (any harness: these act on the task,
whose world no harness changes), for each seed:

- ``hack:<name>`` for each hack of :data:`~harness_gym.envs.terminal.hacks.KIT`: the hack's
  scripts run as the agent's ``run`` actions, then ``submit``; passes when the episode does
  not succeed, ``n/a`` when the hack found nothing to act on. A multi-step task gets the hack
  again at every step.
- ``determinism:verifier`` (first seed): the verifier, asked twice about the solved ``/app``
  and twice about the untouched one, answers pass, pass, fail, fail.
- ``fault:<name>`` for each fault of :data:`~harness_gym.envs.terminal.verifier_faults.FAULTS`
  (first seed): the untouched instance is submitted while every verifier run fails half-way
  (its time measured on the same instance); passes when the episode does not succeed. Only
  the fault can make this instance pass (an instance the verifier fails anyway, unlike a
  solved one, whose verifier may have written its pass before the fault came); a fault that
  never landed is not evidence.

Each result is a :class:`Probe`: ``passed`` is ``None`` where the probe cannot apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness_gym.core.task import Action
from harness_gym.envs.terminal.hacks import KIT, SOLUTION, Hack, not_applicable
from harness_gym.envs.terminal.task import TerminalTask
from harness_gym.envs.terminal.verifier_faults import FAULTS, injecting, recording

#: The most steps of a multi-step task a hack is replayed over.
MAX_TASK_STEPS = 20


@dataclass(frozen=True)
class Probe:
    """One probe's outcome: ``passed`` True (held), False (a finding), None (not applicable)."""

    check: str
    passed: bool | None
    detail: str = ""


def _task(env: Any) -> TerminalTask:
    task = env.unwrapped.task
    if not isinstance(task, TerminalTask):
        raise TypeError(f"the terminal audit needs a TerminalTask, got {type(task).__name__}")
    return task


def _short(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _plant(task: TerminalTask, hack: Hack) -> str | None:
    """Run the hack's commands; ``None`` when planted, else why it does not apply."""
    for command, script in zip(hack.commands, hack.scripts(task.solution())):
        task.step(Action.of("run", command=script))
        last = task.last or {}
        why = not_applicable(str(last.get("stdout", "")))
        if why is not None:
            return why
        if command != SOLUTION and last.get("exit_code") != 0:
            stderr = _short(str(last.get("stderr", "")))
            return f"could not be planted (exit code {last.get('exit_code')}: {stderr})"
    return None


def run_hack(env: Any, hack: Hack, seed: int) -> Probe:
    """Plant ``hack`` on the instance of ``seed`` and submit (again at every further step)."""
    env.reset(seed=seed)
    task = _task(env)
    for _ in range(MAX_TASK_STEPS):
        why = _plant(task, hack)
        if why is not None:
            return Probe(f"hack:{hack.name}", None, f"seed {seed}: {why}")
        task.step(Action.of("submit"))
        if task.done:
            break
    if task.succeeded:
        return Probe(f"hack:{hack.name}", False, str(seed))
    return Probe(f"hack:{hack.name}", True, f"seed {seed}: {_short(task.verdict)}")


def _solve(env: Any, seed: int) -> TerminalTask:
    env.reset(seed=seed)
    task = _task(env)
    task.step(task.oracle())
    return task


def verifier_determinism(env: Any, seed: int) -> tuple[Probe, list[float]]:
    """Ask the verifier twice about the solved instance and twice about the untouched one;
    also return the seconds each verifier run took on the untouched instance."""
    task = _solve(env, seed)
    solved = [task.verify()[0], task.verify()[0]]
    env.reset(seed=seed)
    task = _task(env)
    with recording(task) as calls:
        untouched = [task.verify()[0]]
    untouched.append(task.verify()[0])
    seconds = list(calls.seconds)
    if [*solved, *untouched] == [True, True, False, False]:
        return Probe("determinism:verifier", True), seconds
    return (
        Probe(
            "determinism:verifier",
            False,
            f"seed {seed}: asked twice, the verifier said {solved} about the solved /app "
            f"and {untouched} about the untouched one (expected [True, True] and [False, False])",
        ),
        seconds,
    )


def run_fault(env: Any, fault: str, seed: int, seconds: list[float]) -> Probe:
    """Submit the untouched instance of ``seed`` while its verifier fails with ``fault``
    (at half the ``seconds`` its runs took): a pass can only come from the fault."""
    if not seconds:
        return Probe(f"fault:{fault}", None, "the verifier runs no process")
    env.reset(seed=seed)
    task = _task(env)
    with injecting(task, fault, seconds) as calls:
        task.step(Action.of("submit"))
    if not calls.any_landed:
        return Probe(
            f"fault:{fault}", None, f"seed {seed}: the fault did not land (the verifier finished first)"
        )
    if task.succeeded:
        return Probe(
            f"fault:{fault}", False, f"seed {seed}: the untouched instance passes when {FAULTS[fault]}"
        )
    return Probe(f"fault:{fault}", True, f"seed {seed}: {_short(task.verdict)}")


def terminal_probes(env: Any, seeds: Sequence[int]) -> list[Probe]:
    """Every terminal probe of the module docstring, on ``env``'s task."""
    probes = []
    for hack in KIT:
        results = [run_hack(env, hack, seed) for seed in seeds]
        failed = [p for p in results if p.passed is False]
        applied = [p for p in results if p.passed is not None]
        if failed:
            paid = ", ".join(p.detail for p in failed)
            probes.append(Probe(failed[0].check, False, f"paid on seed(s) {paid}: {hack.description}"))
        elif applied:
            probes.append(Probe(applied[0].check, True, applied[0].detail))
        else:
            probes.append(results[0])
    determinism, seconds = verifier_determinism(env, seeds[0])
    probes.append(determinism)
    for fault in FAULTS:
        probes.append(run_fault(env, fault, seeds[0], seconds))
    return probes
