"""A Harbor task folder as a terminal task: its episodes, oracle, steps and verification.

:func:`~harness_gym.envs.terminal.harbor.load_harbor_task` makes one subclass of
:class:`HarborTask` per folder. An episode runs in the agent's sandbox (over a built root
file system when the Dockerfile needs one); the oracle uploads ``solution/`` and runs
``solve.sh`` as Harbor's does; ``submit`` verifies the current step in a fresh verifier
sandbox (:mod:`~harness_gym.envs.terminal.harbor_verify`), moves to the next step or ends
the episode with Harbor's trial reward.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness_gym.core.task import Action, StepResult
from harness_gym.envs.terminal.episode_dirs import copy_tree, remove_tree, walk_tree
from harness_gym.envs.terminal.harbor_format import MAX_TESTS_BYTES, HarborStep, tests_files
from harness_gym.envs.terminal.harbor_image import ImagePlan
from harness_gym.envs.terminal.harbor_verify import (
    FIXED_VERIFIER_ENV,
    copy_tests,
    min_reward_failure,
    named_reward_files,
    read_reward,
    reward_tampering,
)
from harness_gym.envs.terminal.sandbox_limits import SandboxLimits
from harness_gym.envs.terminal.task import TerminalTask


class HarborTask(TerminalTask):
    """A Harbor task folder as a terminal task (see the module docstring)."""

    folder: Path
    plan: ImagePlan = ImagePlan()
    image_env: dict[str, str] = {}
    solution_env: dict[str, str] = {}
    steps: tuple[HarborStep, ...] = ()
    #: The Dockerfile as build steps when the instance needs a built root file system.
    build_steps: tuple[Any, ...] = ()
    #: The root file system once built (:meth:`build_rootfs`; shared by the class's episodes).
    built: Any = None
    reward_strategy = "mean"
    network = "none"
    limits = SandboxLimits(timeout=30.0)

    def build(self, rng: np.random.Generator) -> None:
        #: What the last verification found that makes its reward untrustworthy.
        self.tampering: list[str] = []
        self.step_index = 0
        self.step_rewards: list[dict[str, float] | None] = []
        self.agent_seconds = 0.0
        built = bool(self.build_steps)
        self.files = {} if built else dict(self.plan.files)  # built: /app comes from the image
        self.files.update(self.steps[0].workdir_files)
        self.setup = [] if built else list(self.plan.setup)
        if self.plan.executables and not built:
            self.setup.insert(0, "chmod +x -- " + " ".join(shlex.quote(p) for p in self.plan.executables))
        self.setup += self._step_setup(self.steps[0])
        self.instruction = self.steps[0].instruction
        self.params = {
            "folder": self.folder.name,
            "image": self.plan.base_image,
            "network": self.network,
            "steps": [s.name for s in self.steps if s.name],
        }

    def make_sandbox(self, root: Path) -> Any:
        """The agent's sandbox (from :attr:`backend`, bwrap by default): ``/solution`` mounted
        read-only from the episode directory (empty until the oracle uploads the solution),
        the image's ``ENV``, and the built root file system when the task needs one."""
        from harness_gym.envs.terminal.backends import open_backend

        solution = root / "solution"
        solution.mkdir(exist_ok=True)
        # Harbor's containers have a writable /logs (a RUN or the agent may write there); the
        # verifier never sees this one: it gets a fresh /logs of its own.
        logs = root / "agent-logs"
        (logs / "agent").mkdir(parents=True, exist_ok=True)
        binds = ((solution, "/solution", False), (logs, "/logs", True))
        if not self.build_steps:
            return open_backend(self.backend, root, self.limits, env=self.image_env, binds=binds)
        built = type(self).build_rootfs()
        if built.app.is_dir():  # what the build left in /app is the episode's start
            copy_tree(built.app, root / "app")
        for rel, content in self.steps[0].workdir_files.items():
            (root / "app" / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / "app" / rel).write_bytes(content)
        return open_backend(
            self.backend,
            root,
            self.limits,
            rootfs=built.path,
            env={**built.env, **self.image_env},
            binds=binds,
        )

    @classmethod
    def build_rootfs(cls, progress: bool | None = None) -> Any:
        """The root file system of this task's Dockerfile (built once, then from the cache of
        :func:`~harness_gym.envs.terminal.rootfs.build_rootfs`); ``None`` when the task needs
        none. A failing build raises ``BuildFailed`` naming the Dockerfile line."""
        if not cls.build_steps:
            return None
        if cls.built is None:
            from harness_gym.envs.terminal import rootfs

            if progress is None:  # a bar where someone watches (a first reset can take minutes)
                progress = sys.stderr.isatty()
            cls.built = rootfs.build_rootfs(
                cls.plan.base_image, cls.build_steps, cls.folder / "environment", progress=progress
            )
        return cls.built

    @property
    def current(self) -> HarborStep:
        return self.steps[min(self.step_index, len(self.steps) - 1)]

    def solution(self) -> str:
        """``bash /solution/solve.sh`` as Harbor's oracle runs it; the trailing comment names
        the solution's content digest, so only the oracle's own command uploads it."""
        step = self.current
        if step.solution is None:
            return "true  # this task has no solution/solve.sh"
        variables = {"DEBIAN_FRONTEND": "noninteractive", **self.solution_env}
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
        return f"env {assigns} bash /solution/solve.sh  # harbor oracle {step.solution_digest}"

    def step(self, action: Action) -> StepResult:
        if self.done or self._sandbox is None:
            return super().step(action)
        if action.name == "run" and action["command"] == self.solution() and self.current.solution:
            self._upload_solution(self.current.solution)
        if action.name != "submit":
            if self.agent_seconds >= self.current.agent_timeout:  # Harbor: the agent phase ends
                result = super().step(Action.of("submit"))
                self.verdict = f"agent timeout ({self.current.agent_timeout:g} s); {self.verdict}"
                return StepResult(result.reward, result.done, result.success, self.verdict)
            start = time.monotonic()
            result = super().step(action)
            self.agent_seconds += time.monotonic() - start
            return result
        return self._submit()

    def _submit(self) -> StepResult:
        assert self._sandbox is not None
        try:
            self._sandbox.stop_agent()
        except OSError:
            pass
        step = self.current
        try:
            rewards, why = self._verify_step(step)
        except Exception as err:  # noqa: BLE001 - a broken state is a failed check, never a crash
            rewards, why = None, f"verifier error: {type(err).__name__}: {err}"
        self.step_rewards.append(rewards)
        reward = (rewards or {}).get("reward")
        last = self.step_index + 1 >= len(self.steps)
        gate = min_reward_failure(rewards, step.min_reward)
        record = {
            "action": "submit",
            "step": step.name,
            "rewards": rewards,
            "verdict": why,
            "tampering": list(self.tampering),
        }
        if not last and gate is None and rewards is not None:
            self.step_index += 1
            self.oracle_done = False
            self.agent_seconds = 0.0
            nxt = self.current
            self._start_step(nxt)
            self.instruction = nxt.instruction
            self.last = {
                "kind": "submit",
                "ok": True,
                "text": f"step {step.name!r} checked (reward {reward}); "
                f"next step {nxt.name!r}:\n{nxt.instruction}",
            }
            self.history.append(record)
            return StepResult(0.0, False, False, "")
        total = self._trial_reward()
        ok = total is not None and total >= 1.0
        if not ok and not last and gate is not None:
            why = f"step {step.name!r}: {gate}, so the remaining steps are not run; {why}"
        if not ok and not why:
            why = f"reward {total}"
        self.done, self.succeeded, self.verdict = True, ok, "" if ok else why
        self.last = {"kind": "submit", "ok": ok, "text": "submitted"}
        record.update(success=ok, verdict=self.verdict, reward=total)
        self.history.append(record)
        return StepResult(float(ok), True, ok, self.verdict)

    def verify(self) -> tuple[bool, str]:
        """Run the current step's verifier (as at submit) and say whether its reward is 1."""
        rewards, why = self._verify_step(self.current)
        reward = (rewards or {}).get("reward")
        ok = reward is not None and reward >= 1.0
        return ok, "" if ok else (why or f"reward {reward}")

    def _trial_reward(self) -> float | None:
        """Harbor's trial reward: the one step's, or per ``multi_step_reward_strategy``
        ("mean" of the steps that produced a result, a missing key counting 0; "final")."""
        if len(self.steps) == 1 or self.reward_strategy == "final":
            last = self.step_rewards[-1] if self.step_rewards else None
            return None if last is None else last.get("reward")
        results = [r for r in self.step_rewards if r is not None]
        if not results:
            return None
        return sum(r.get("reward", 0.0) for r in results) / len(results)

    def _verify_step(self, step: HarborStep) -> tuple[dict[str, float] | None, str]:
        assert self._root is not None and self._sandbox is not None
        self.tampering = []
        work = self._root / "verifier"  # beside app/ and home/: never mounted for the agent
        remove_tree(work)
        tests, logs = work / "tests", work / "logs"
        try:
            for source in step.tests:
                copy_tests(source, tests, self.folder.name)
            script = tests / step.test_script
            if script.is_file() and not script.is_symlink():
                os.chmod(script, 0o755)  # Harbor: chmod +x, then run the script itself
            for sub in ("verifier", "agent"):
                (logs / sub).mkdir(parents=True)
            env = {
                k: v
                for k, v in {**self.image_env, **step.verifier_env}.items()
                if k not in FIXED_VERIFIER_ENV
            }
            res = self._sandbox.run_verifier(
                shlex.quote(f"/tests/{step.test_script}"),
                timeout=step.verifier_timeout,
                env=env,
                binds=((tests, "/tests", False), (logs, "/logs", True)),
                app_writable=True,  # as in Harbor: a test may write next to the code it checks
                cwd=self.plan.workdir if self.plan.workdir.startswith("/app") else "/app",
            )
            rewards, why = read_reward(logs)
            tampering = list(res.tampering)
            if res.supervised:  # the files as test.sh left them (a remote backend copies them)
                tampering += reward_tampering(logs, named_reward_files(tests))
        finally:
            remove_tree(work)
        tail = f"(test.sh exit code {res.exit_code}{', timed out' if res.timed_out else ''}; "
        tail += f"{res.stdout[-200:]}{res.stderr[-200:]})"
        self.tampering = tampering
        if tampering:
            return None, f"reward tampering: {'; '.join(tampering)} {tail}"
        if res.timed_out:
            return None, f"test.sh timed out after {step.verifier_timeout:g} s {tail}"
        if rewards is None:
            return None, f"{why} {tail}"
        reward = rewards.get("reward")
        if reward is None or reward < 1.0:
            return rewards, f"reward {reward}: {(res.stdout + res.stderr)[-300:]}"
        return rewards, ""

    def _upload_solution(self, source: Path) -> None:
        """Copy the solution folder into the episode's ``/solution`` (as Harbor's oracle
        uploads it), replacing what an earlier step put there."""
        assert self._root is not None
        target = self._root / "solution"
        for child in list(target.iterdir()):
            remove_tree(child)
        for rel, is_dir in tests_files(source, self.folder.name, what="solution"):
            dest = target / rel
            if is_dir:
                dest.mkdir(mode=0o755, exist_ok=True)
                continue
            fd = os.open(source / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                dest.write_bytes(f.read(MAX_TESTS_BYTES + 1))
            os.chmod(dest, 0o755)
        for path in walk_tree(target):
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o755)

    def _step_setup(self, step: HarborStep) -> list[str]:
        if step.name and "setup.sh" in step.workdir_files:
            return ["cd /app && bash /app/setup.sh"]
        return []

    def _start_step(self, step: HarborStep) -> None:
        """Harbor's next-step preparation: upload ``workdir/`` into the working directory,
        then run its ``setup.sh``."""
        assert self._sandbox is not None
        for rel, content in step.workdir_files.items():
            self._sandbox.write_file(f"/app/{rel}", content.decode("utf-8", "replace"))
        for command in self._step_setup(step):
            self._sandbox.run(command, persistent=False, timeout=120)
