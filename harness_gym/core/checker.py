"""check_harness: does a harness keep the contract on a task? In the spirit of ``check_env``.

It checks, over a few seeds:

- ``schema``: every tool schema (OpenAI and Anthropic shapes) is valid JSON Schema, and the
  arguments of every legal action validate against it (uses the ``jsonschema`` package);
- ``round_trip``: ``parse(format_action(a)) == a`` for every legal action along oracle and
  random trajectories; an action whose text is longer than ``max_action_chars`` is counted
  as ``inexpressible`` instead (the harness limits what can be written, as a dropped tool
  does), which is also what the ceiling search leaves out. Every tool with a string
  argument must also round-trip :data:`HARD_STRINGS` (quotes, newlines, backslashes,
  non-ASCII text), which an agent may write though no legal action on the way holds them;
- ``determinism``: the same seed renders the same observations, legal actions and prompt,
  also when Python's and NumPy's global random states differ between the two runs (a task
  that draws from them does not build its instance from the seed);
- ``oracle_legal``: the task oracle's action is always among the task's legal actions;
- ``pairing``: the task instance (state digest) is the one the canonical harness gets;
- ``oracle``: for a pure-presentation harness (no dropped tool, budget not cut, every legal
  action met expressible), the oracle succeeds on exactly the seeds where it succeeds under
  the canonical harness, and, given a ``ceiling`` function, its return equals the exact
  ceiling through this harness wherever the search can compute it.

:func:`check_task` holds a task to the rules the package's own tests demand of its built-in
tasks (:data:`TASK_RULES`), so an out-of-tree task gets the same scrutiny:

- ``oracle_optimal``: the oracle reaches the ceiling on every seed (the exact ceiling when a
  ``ceiling`` function is given and its search finishes, else success), with no invalid action;
- ``oracle_legal``: the oracle's action is among the legal actions at every step;
- ``instances_vary``: different seeds build different instances;
- ``seed_decides``: the seed alone decides the instance and its future: the same seed builds
  the same instance and oracle episode whatever Python's and NumPy's global random states;
- ``random_agent``: a uniform random agent does not succeed too often;
- ``tight_budget``: under a one-step budget the episode ends after one step and succeeds only
  where the oracle needs one step;
- ``snapshot_restore``: ``restore(snapshot())`` brings back the state and the same future.

The exact ceiling search lives in :mod:`harness_gym.analysis.ceiling`, above this module;
callers that have it pass ``ceiling=harness_gym.analysis.ceiling.seed_ceiling`` (the CLI does).

Every failure names the check, what went wrong, why it matters, and the factor levels involved.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from harness_gym.core.env import HarnessEnv, presented_harness, unwrap_harness_env
from harness_gym.core.harness import Harness, HarnessSpecError
from harness_gym.core.task import Action, Task
from harness_gym.core.tools import ActionError

#: Factors that bear on each check, so a failure reports the levels that matter.
CHECK_FACTORS: dict[str, tuple[str, ...]] = {
    "bind": tuple(Harness.factor_names()),
    "schema": ("tool_style", "tool_naming", "rename_tools", "rename_args", "tool_descriptions", "drop_tools"),
    "round_trip": ("tool_style", "tool_naming", "rename_tools", "rename_args", "parser", "max_action_chars"),
    "determinism": tuple(Harness.factor_names()),
    "pairing": tuple(Harness.factor_names()),
    "oracle": tuple(Harness.factor_names()),
    "oracle_optimal": (),
    "oracle_legal": (),
    "instances_vary": (),
    "seed_decides": (),
    "random_agent": (),
    "tight_budget": ("step_budget",),
    "snapshot_restore": (),
    "element_order": ("element_order",),
}

#: The package's task-quality rules, and why each matters (printed with a failure).
TASK_RULES: dict[str, str] = {
    "oracle_optimal": "the oracle is the reference for ceilings, mismatch and every check_harness "
    "comparison; an oracle that misses the ceiling makes every harness look worse than it is",
    "oracle_legal": "the ceiling search, the random agent and every policy choose among the legal "
    "actions; an oracle acting outside them reaches what no policy can, so its success is not a "
    "ceiling (an exact ceiling of 0 beside an oracle scoring 1)",
    "instances_vary": "instances that do not vary across seeds can be memorized, so success no longer "
    "shows that an agent read the observation, and seeds stop being independent samples",
    "seed_decides": "paired episodes need the same instance under every harness for the same seed; "
    "a task that draws from Python's or NumPy's global random state builds whatever other code "
    "left there (draw from the rng passed to reset)",
    "random_agent": "when a random agent succeeds this often, success says little about what an "
    "agent understood and harness effects drown in luck",
    "tight_budget": "the step budget is a harness factor; a cut budget must end the episode when "
    "it runs out, or ceilings under cut budgets are wrong",
    "snapshot_restore": "the ceiling search and check_harness explore branches with snapshot() and "
    "restore(); a snapshot that does not bring back the state and its future makes ceilings wrong",
}

#: String arguments every tool must round-trip: quotes, newlines, backslashes, non-ASCII text.
HARD_STRINGS: tuple[str, ...] = (
    'say "hi"',
    "it's",
    "both ' and \"",
    "two\nlines\n",
    "back\\slash\\",
    "tab\there",
    "naïve café — 日本語 🙂",
    "<b>&amp;</b>",
    '{"a": [1]}',
    "[x] (y), z;",
    "  padded  ",
)

#: Largest share of episodes a uniform random agent may win (the built-in tasks' rule).
MAX_RANDOM_SUCCESS = 0.8

#: ``ceiling(task, harness, seed) -> (value, method)``, e.g.
#: :func:`harness_gym.analysis.ceiling.seed_ceiling`; ``method == "exact"`` when the search finished.
CeilingFn = Callable[[type[Task], Harness, int], tuple[float, str]]


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
    ceiling: CeilingFn | None = None,
    task_rules: bool = False,
) -> HarnessReport:
    """Check one harness on one task; raise :class:`HarnessCheckError` listing every failure.

    Args:
        env_or_harness: a HarnessEnv (possibly wrapped) or anything ``make_env`` takes as a
            harness (a Harness, preset name, dict or YAML path).
        task: the task id or class; required unless an env is given.
        seeds: the task seeds to check on.
        raise_on_failure: return the report instead of raising.
        ceiling: the exact ceiling search (``harness_gym.analysis.ceiling.seed_ceiling``):
            under a pure-presentation harness the oracle must reach it on every seed.
        task_rules: also hold the task to :data:`TASK_RULES` (see :func:`check_task`).
    """
    from harness_gym.core.registry import get_task

    if isinstance(env_or_harness, gym.Env):
        base = unwrap_harness_env(env_or_harness, "check_harness")
        task_cls: type[Task] = type(base.task)
        harness = presented_harness(env_or_harness)  # with its harness wrappers' changes
    else:
        if task is None:
            raise TypeError("check_harness(harness, task): pass the task id or class with a harness")
        task_cls = get_task(task) if isinstance(task, str) else task
        from harness_gym.core.presets import resolve_harness

        harness = resolve_harness(env_or_harness)
    seeds = list(seeds)
    report = HarnessReport(task_cls.task_id, harness)
    from harness_gym.core.registry import make_env

    # make_env builds a family's own env (a terminal task's sandboxed env), so the family's
    # presentation and reply conventions are checked, not only the generic factors.
    try:
        env = make_env(task_cls, harness)
    except HarnessSpecError as err:
        report.fail("bind", str(err))
        return _finish(report, raise_on_failure)
    canonical = make_env(task_cls, Harness())
    _check_schema(env, report)
    _check_hard_strings(env, report)
    pure = is_pure_presentation(harness, task_cls)
    _check_element_order(env, seeds, report)
    for seed in seeds:
        _check_episode(env, canonical, seed, report, compare_oracle=pure, ceiling=ceiling)
    if task_rules:
        _check_task_rules(task_cls, seeds, report, ceiling)
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
        tool = next((t for t in toolbox.tools if t.spec.name == action.name), None)
        if tool is None:  # not a tool under this harness (a dropped tool, a sentinel reply)
            continue
        args = {shown: _as_json(action[p.name]) for shown, p in zip(tool.arg_names, tool.params, strict=True)}
        errors = list(jsonschema.Draft202012Validator(schemas[tool.name]).iter_errors(args))
        if errors:
            report.fail("schema", f"legal action {action} does not validate: {errors[0].message}")
        _count(report, "schema")


def _as_json(value: Any) -> Any:
    """An action's argument as JSON holds it: a list argument is a tuple in an
    :class:`Action` (hashable) and an array in JSON Schema."""
    return [_as_json(v) for v in value] if isinstance(value, (tuple, list)) else value


#: Values this check invents for a parameter type when no legal action shows one.
_INVENTED: dict[str, Any] = {"int": 0, "str": "x", "float": 0.5, "list[int]": (0, 1), "list[str]": ("a", "b")}


def _check_hard_strings(env: HarnessEnv, report: HarnessReport) -> None:
    """Every exposed tool with a string argument must round-trip :data:`HARD_STRINGS` in it,
    and so must a ``list[str]`` argument holding one (as its first item)."""
    env.reset(seed=0)
    legal = env.task.legal_actions()
    for spec in env.task.action_specs:
        stringy = [p for p in spec.params if p.type in ("str", "list[str]")]
        if spec.name not in env.bound.tool_names or not stringy:
            continue
        template = next((a for a in legal if a.name == spec.name), None)
        if template is not None:
            values = dict(template.args)
        elif all(p.type in _INVENTED for p in spec.params):
            values = {p.name: _INVENTED[p.type] for p in spec.params}
        else:  # a parameter type this check cannot invent a value for
            continue
        for param in stringy:
            for hard in HARD_STRINGS:
                if param.type == "str":
                    value: Any = hard
                else:
                    value = (hard, *tuple(values.get(param.name) or ())[1:])
                action = Action(
                    spec.name, tuple((n, value if n == param.name else v) for n, v in values.items())
                )
                _count(report, "round_trip")
                err = _round_trip_problem(env, action)
                if err is not None:
                    report.fail(
                        "round_trip",
                        f"{err}: string arguments with quotes, newlines, backslashes or non-ASCII text "
                        "must round-trip, since an agent may write any text there",
                    )
                    break


def _round_trip_problem(env: HarnessEnv, action: Action) -> str | None:
    """Why ``action`` does not come back from its own text (``None``: it does, or is too long)."""
    try:
        text = env.format_action(action)
    except Exception as err:  # noqa: BLE001 - a writer raising is a finding
        return f"{action} cannot be written: {type(err).__name__}: {err}"
    try:
        back = env.bound.parse(text)
    except ActionError as err:
        return None if err.kind == "too_long" else f"{action} written as {text!r} does not parse: {err}"
    except Exception as err:  # noqa: BLE001 - a reader raising is a finding
        return f"{action} written as {text!r} raises {type(err).__name__}: {err}"
    return None if back == action else f"{action} written as {text!r} parses back as {back}"


def _oracle_is_legal(task: Task) -> bool:
    legal = task.legal_actions()
    return not legal or task.oracle() in legal


@contextmanager
def global_random_state(*salt: int) -> Iterator[None]:
    """Run with Python's and NumPy's global random generators seeded from ``salt``, then put
    their states back: a task whose episode changes with ``salt`` draws from them."""
    py_state, np_state = random.getstate(), np.random.get_state()
    value = int(np.random.SeedSequence([7919, *salt]).generate_state(1)[0])
    random.seed(value)
    np.random.seed(value)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def _check_episode(
    env: HarnessEnv,
    canonical: HarnessEnv,
    seed: int,
    report: HarnessReport,
    compare_oracle: bool,
    ceiling: CeilingFn | None = None,
) -> None:
    before = len(report.inexpressible)
    runs = []
    for salt in (1, 2):  # other global random states: only the seed may decide the episode
        with global_random_state(seed, salt):
            runs.append(_play(env, seed, report))
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
        if ceiling is not None:
            best, method = ceiling(type(env.task), env.harness, seed)
            if method == "exact" and runs[0]["return"] < best - 1e-9:
                report.fail(
                    "oracle",
                    f"seed {seed}: the oracle returns {runs[0]['return']:g} through this harness but "
                    f"the exact ceiling is {best:g}: the oracle is not optimal here",
                )
            elif method == "exact" and runs[0]["return"] > best + 1e-9:
                report.fail("oracle", _above_ceiling(seed, runs[0]["return"], best))


def _check_element_order(env: HarnessEnv, seeds: list[int], report: HarnessReport) -> None:
    """Under ``element_order=reversed`` the harness shows each seed's fields with the same keys
    and values, every mapping's keys in reverse order; a format that writes the same text under
    both orders (its elements' key order is fixed, as in ``axtree``) gets a note."""
    from harness_gym.core.registry import make_env

    base = unwrap_harness_env(env, "check_harness")
    if base.harness.element_order == "canonical":
        return
    canonical = unwrap_harness_env(
        make_env(type(base.task), base.harness.replace(element_order="canonical")), "check_harness"
    )
    same_text = 0
    for seed in seeds:
        _count(report, "element_order")
        shown = base.reset(seed=seed)[0]
        plain = canonical.reset(seed=seed)[0]
        want = canonical.bound.ordered_fields(base._fields)
        got = base.bound.ordered_fields(base._fields)
        problem = _reordered_problem(got, want, base.harness.element_order)
        if problem:
            report.fail("element_order", f"seed {seed}: {problem}")
        same_text += shown == plain
    if seeds and same_text == len(seeds):
        report.notes.append(
            f"element_order={base.harness.element_order} renders the same text as canonical under "
            f"obs_format={base.harness.obs_format} on every seed checked: that format fixes the order of "
            "its elements' keys, so this level changes nothing there"
        )


def _reordered_problem(got: Any, want: Any, level: str, path: str = "fields") -> str | None:
    """Why ``got`` is not ``want`` with every mapping's keys in ``level`` order, or ``None``."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"{path} shows keys {list(got) if isinstance(got, dict) else got!r}, not {list(want)}"
        if path != "fields" and level == "reversed" and list(got) != list(reversed(want)):
            return f"{path} shows its keys in the order {list(got)}, not reversed from {list(want)}"
        for key in want:
            problem = _reordered_problem(got[key], want[key], level, f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(want, list | tuple):
        if not isinstance(got, list | tuple) or len(got) != len(want):
            return f"{path} shows {got!r}, not the {len(want)} items of {want!r}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            problem = _reordered_problem(a, b, level, f"{path}[{i}]")
            if problem:
                return problem
        return None
    return None if got == want else f"{path} shows {got!r}, not {want!r}"


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
    total = 0.0
    flagged = False  # one oracle_legal failure per episode
    while not done:
        if report is not None:
            _count(report, "oracle_legal")
            if not flagged and not _oracle_is_legal(env.task):
                flagged = True
                report.fail(
                    "oracle_legal",
                    f"seed {seed}, step {info['step']}: the oracle's action {env.task.oracle()} is not "
                    f"among the task's legal actions. Why it matters: {TASK_RULES['oracle_legal']}",
                )
            _check_round_trips(env, report)
            # Also from a state off the oracle's path: one random legal action, then undo it.
            legal = env.legal_actions()
            if legal and rng.random() < 0.3:
                snap = env.task.snapshot()
                env.task.step(legal[int(rng.integers(len(legal)))])
                _check_round_trips(env, report)
                env.task.restore(snap)
        obs, reward, terminated, truncated, info = env.step(env.oracle_action())
        total += float(reward)
        record["observations"].append(obs)
        record["legal"].append(info["legal_actions"])
        done = terminated or truncated
    record["success"] = info["success"]
    record["return"] = total
    return record


def _check_round_trips(env: HarnessEnv, report: HarnessReport) -> None:
    """Every exposed legal action must round-trip, or be too long for ``max_action_chars``.

    Also checks that the env's legal actions are exactly the ones that round-trip, the set
    the ceiling search plans over.
    """
    legal = set(env.legal_actions())
    written: list[str] = []
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
        if ok:
            written.append(text)
    # Two actions in one reply are never one of them run silently (a reader that stops after
    # the first call passes every round trip and still drops the second).
    if len(written) >= 2:
        _count(report, "round_trip")
        both = written[0] + "\n" + written[-1]
        try:
            back = env.bound.parse(both)
        except ActionError:
            pass
        except Exception as err:  # noqa: BLE001 - any failure here is a finding
            report.fail("round_trip", f"two actions {both!r} raise {type(err).__name__}: {err}")
        else:
            report.fail(
                "round_trip",
                f"two actions in one reply {both!r} parse as the one action {back}: the reader drops "
                "the rest; it must answer multiple_actions (or another error)",
            )


# -- task rules --------------------------------------------------------------------------------


def check_task(
    task: str | type[Task],
    seeds: Iterable[int] = range(10),
    ceiling: CeilingFn | None = None,
    raise_on_failure: bool = True,
) -> HarnessReport:
    """Hold a task to the package's task-quality rules (:data:`TASK_RULES`) on ``seeds``.

    The oracle is compared with ``ceiling(task, harness, seed)`` where that search is exact
    (pass :func:`harness_gym.analysis.ceiling.seed_ceiling`), else with success. Raises
    :class:`HarnessCheckError` naming every broken rule and why it matters, unless
    ``raise_on_failure`` is false.
    """
    from harness_gym.core.registry import get_task

    task_cls = get_task(task) if isinstance(task, str) else task
    report = HarnessReport(task_cls.task_id, Harness())
    _check_task_rules(task_cls, list(seeds), report, ceiling)
    return _finish(report, raise_on_failure)


def _check_task_rules(
    task_cls: type[Task], seeds: list[int], report: HarnessReport, ceiling: CeilingFn | None
) -> None:
    rules: list[tuple[str, Callable[..., None]]] = [
        ("oracle_optimal", _rule_oracle_optimal),
        ("oracle_legal", _rule_oracle_legal),
        ("instances_vary", _rule_instances_vary),
        ("seed_decides", _rule_seed_decides),
        ("random_agent", _rule_random_agent),
        ("tight_budget", _rule_tight_budget),
        ("snapshot_restore", _rule_snapshot_restore),
    ]
    for rule, check in rules:
        _count(report, rule, 0)
        start = len(report.failures)
        try:
            check(task_cls, seeds, report, ceiling)
        except Exception as err:  # noqa: BLE001 - the task's code raising is the finding
            report.fail(rule, f"checking it raised {type(err).__name__}: {' '.join(str(err).split())}")
        # One failure per rule: what went wrong (the first few cases) and why the rule matters.
        found = report.failures[start:]
        if found:
            del report.failures[start:]
            shown = "; ".join(f.message for f in found[:3])
            more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
            report.fail(rule, f"{shown}{more}. Why it matters: {TASK_RULES[rule]}")


def _oracle_run(env: HarnessEnv, seed: int) -> dict[str, Any]:
    env.reset(seed=seed)
    total, steps, done, info = 0.0, 0, False, {}
    while not done:
        _, reward, terminated, truncated, info = env.step(env.oracle_action())
        total, steps, done = total + float(reward), steps + 1, terminated or truncated
    return {
        "return": total,
        "steps": steps,
        "success": bool(info["success"]),
        "invalid": info["invalid_actions"],
    }


def _rule_oracle_optimal(
    task_cls: type[Task], seeds: list[int], report: HarnessReport, ceiling: CeilingFn | None
) -> None:
    env = HarnessEnv(task_cls, Harness())
    missed, inexact = [], []
    for seed in seeds:
        _count(report, "oracle_optimal")
        run = _oracle_run(env, seed)
        if run["invalid"]:
            report.fail(
                "oracle_optimal",
                f"seed {seed}: the oracle made {run['invalid']} invalid action(s); its actions must be legal",
            )
        best, method = ceiling(task_cls, Harness(), seed) if ceiling is not None else (None, "none")
        if method == "exact" and best is not None:
            if run["return"] < best - 1e-9:
                missed.append(f"seed {seed}: return {run['return']:g} < exact ceiling {best:g}")
            elif run["return"] > best + 1e-9:
                report.fail("oracle_optimal", _above_ceiling(seed, run["return"], best))
        else:
            inexact.append(seed)
            if not run["success"]:
                missed.append(f"seed {seed}: no success in {run['steps']} step(s)")
    if missed:
        how = "the exact ceiling" if ceiling is not None else "success (no ceiling search given)"
        report.fail(
            "oracle_optimal",
            f"the oracle falls short of {how} on {len(missed)} of {len(seeds)} seeds ("
            + "; ".join(missed[:5])
            + (" ..." if len(missed) > 5 else "")
            + ")",
        )
    if ceiling is not None and inexact:
        report.notes.append(
            f"oracle_optimal: the exact ceiling search did not finish on seed(s) {inexact[:10]}; "
            "there the oracle was held to success instead"
        )


def _above_ceiling(seed: int, value: float, best: float) -> str:
    """The failure of an oracle that beats the exact ceiling: no policy can, so the search
    missed actions the oracle takes (``legal_actions()`` empty or incomplete)."""
    return (
        f"seed {seed}: the oracle returns {value:g} but the exact ceiling is {best:g}: no policy can "
        "beat the exact ceiling, so the search missed the oracle's actions (legal_actions() empty "
        "or incomplete while the oracle acts)"
    )


def _rule_instances_vary(
    task_cls: type[Task], seeds: list[int], report: HarnessReport, ceiling: CeilingFn | None
) -> None:
    if len(seeds) < 2:
        return
    env = HarnessEnv(task_cls, Harness())
    digests = {env.reset(seed=s)[1]["state_digest"] for s in seeds}
    _count(report, "instances_vary", len(seeds))
    needed = max(2, math.ceil(len(seeds) / 2))
    if len(digests) < needed:
        report.fail(
            "instances_vary",
            f"{len(seeds)} seeds built {len(digests)} distinct instance(s); at least {needed} expected "
            "(draw the instance from the rng passed to reset)",
        )


def _rule_oracle_legal(
    task_cls: type[Task], seeds: list[int], report: HarnessReport, ceiling: CeilingFn | None
) -> None:
    env = HarnessEnv(task_cls, Harness())
    for seed in seeds:
        env.reset(seed=seed)
        task, step, done = env.task, 0, False
        while not done and step < task.max_steps:
            _count(report, "oracle_legal")
            legal = task.legal_actions()
            if not legal:
                break
            action = task.oracle()
            if action not in legal:
                shown = ", ".join(str(a) for a in legal[:4]) + (" ..." if len(legal) > 4 else "")
                report.fail(
                    "oracle_legal",
                    f"seed {seed}, step {step}: the oracle's action {action} is not among the legal "
                    f"actions [{shown}]",
                )
                break
            done = task.check(action) is not None or task.step(action).terminated
            step += 1


def _oracle_trace(env: HarnessEnv, seed: int) -> list[Any]:
    """What the oracle's episode on ``seed`` shows: each state digest, observation and reward."""
    obs, info = env.reset(seed=seed)
    trace: list[Any] = [info["state_digest"], obs]
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.oracle_action())
        trace += [env.task.digest(), obs, float(reward)]
        done = terminated or truncated
    return trace


#: Run in a fresh interpreter: the oracle trace digest of each seed, for :func:`_rule_seed_decides`.
_TRACES_CHILD = """
import hashlib, importlib, json, sys
from harness_gym.core import checker
from harness_gym.core.env import HarnessEnv
from harness_gym.core.harness import Harness
module, name, seeds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
task_cls = importlib.import_module(module)
for part in name.split("."):
    task_cls = getattr(task_cls, part)
env = HarnessEnv(task_cls, Harness())
out = {}
for seed in seeds:
    trace = checker._oracle_trace(env, seed)
    out[seed] = [trace[0], hashlib.sha256(json.dumps(trace, default=str).encode()).hexdigest()]
print(json.dumps(out))
"""


def _traces_in_subprocesses(task_cls: type[Task], seeds: list[int]) -> list[dict[str, list[str]]] | None:
    """Each seed's (reset digest, trace digest) from interpreters with other ``PYTHONHASHSEED``s:
    an instance built from ``hash()`` of a string or from set order changes between them, not
    within one process. None where the task cannot be imported by name (defined in
    ``__main__`` or a function)."""
    import json
    import os
    import subprocess
    import sys

    if task_cls.__module__ == "__main__" or "<locals>" in task_cls.__qualname__:
        return None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    results = []
    for hash_seed in ("1", "2"):
        argv = [
            sys.executable,
            "-c",
            _TRACES_CHILD,
            task_cls.__module__,
            task_cls.__qualname__,
            json.dumps(seeds),
        ]
        proc = subprocess.run(
            argv, capture_output=True, text=True, env={**env, "PYTHONHASHSEED": hash_seed}, timeout=600
        )
        if proc.returncode != 0:
            return None
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return results


def _rule_seed_decides(
    task_cls: type[Task], seeds: list[int], report: HarnessReport, ceiling: CeilingFn | None
) -> None:
    env = HarnessEnv(task_cls, Harness())
    others = _traces_in_subprocesses(task_cls, seeds)
    if others is None:
        report.notes.append(
            f"seed_decides: {task_cls.__qualname__} cannot be imported by name in another process, so "
            "instances were not compared across PYTHONHASHSEEDs"
        )
    else:
        for seed in seeds:
            one, two = others[0][str(seed)], others[1][str(seed)]
            if one != two:
                what = "built different instances" if one[0] != two[0] else "led to different oracle episodes"
                report.fail(
                    "seed_decides",
                    f"seed {seed}: two processes with other PYTHONHASHSEEDs {what} (hash() of a string, "
                    "or the order of a set, decides the instance): build it from the rng alone",
                )
                break
    for seed in seeds:
        _count(report, "seed_decides")
        traces = []
        for salt in (1, 2):
            with global_random_state(seed, salt):
                traces.append(_oracle_trace(env, seed))
        if traces[0][0] != traces[1][0]:
            report.fail(
                "seed_decides",
                f"seed {seed}: two resets built different instances (digest {traces[0][0]} vs "
                f"{traces[1][0]}) when only Python's / NumPy's global random state differed",
            )
        elif traces[0] != traces[1]:
            report.fail(
                "seed_decides",
                f"seed {seed}: the same instance led to a different oracle episode when only Python's / "
                "NumPy's global random state differed (step draws from it)",
            )


def _rule_random_agent(
    task_cls: type[Task], seeds: list[int], report: HarnessReport, ceiling: CeilingFn | None
) -> None:
    if not seeds:
        return
    env = HarnessEnv(task_cls, Harness())
    rounds = math.ceil(20 / len(seeds))
    wins = episodes = 0
    for k in range(rounds):
        for seed in seeds:
            rng = np.random.default_rng([seed, k])
            env.reset(seed=seed)
            done, info = False, {}
            while not done:
                legal = env.legal_actions()
                text = env.format_action(legal[int(rng.integers(len(legal)))]) if legal else ""
                *_, terminated, truncated, info = env.step(text)
                done = terminated or truncated
            wins += bool(info["success"])
            episodes += 1
    _count(report, "random_agent", episodes)
    if wins > MAX_RANDOM_SUCCESS * episodes:
        report.fail(
            "random_agent",
            f"a uniform random agent succeeded in {wins} of {episodes} episodes "
            f"({100 * wins / episodes:.0f}%, more than {100 * MAX_RANDOM_SUCCESS:.0f}%)",
        )


def _rule_tight_budget(
    task_cls: type[Task], seeds: list[int], report: HarnessReport, ceiling: CeilingFn | None
) -> None:
    full = HarnessEnv(task_cls, Harness())
    tight = HarnessEnv(task_cls, Harness(step_budget=1))
    for seed in seeds:
        _count(report, "tight_budget")
        needed = _oracle_run(full, seed)
        cut = _oracle_run(tight, seed)
        if cut["steps"] != 1:
            report.fail("tight_budget", f"seed {seed}: budget 1 yet the episode ran {cut['steps']} steps")
        elif cut["success"] and not (needed["success"] and needed["steps"] == 1):
            report.fail(
                "tight_budget",
                f"seed {seed}: with step_budget=1 the oracle succeeded, but it needs "
                f"{needed['steps']} steps under the task's own budget",
            )
        elif needed["success"] and needed["steps"] == 1 and not cut["success"]:
            report.fail(
                "tight_budget",
                f"seed {seed}: the oracle succeeds in one step, but not under step_budget=1",
            )


def _rule_snapshot_restore(
    task_cls: type[Task], seeds: list[int], report: HarnessReport, ceiling: CeilingFn | None
) -> None:
    env = HarnessEnv(task_cls, Harness())
    for seed in seeds:
        _count(report, "snapshot_restore")
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        task = env.task
        if rng.random() < 0.5 and task.legal_actions():  # sometimes from a later state
            first = task.oracle()
            if task.step(first).terminated:
                env.reset(seed=seed)
                task = env.task
        snap = task.snapshot()
        before, fields = task.digest(), _json_copy(task.fields())
        path = []
        for _ in range(3):
            legal = task.legal_actions()
            if not legal:
                break
            action = legal[int(rng.integers(len(legal)))] if rng.random() < 0.5 else task.oracle()
            if task.check(action) is not None:
                break
            result = task.step(action)
            path.append((action, task.digest(), result.reward, result.terminated))
            if result.terminated:
                break
        task.restore(snap)
        if task.digest() != before or _json_copy(task.fields()) != fields:
            report.fail(
                "snapshot_restore",
                f"seed {seed}: after restore(snapshot) the state (digest {task.digest()} vs {before}) or "
                "the fields differ from the snapshot's",
            )
            continue
        for action, digest, reward, terminated in path:
            result = task.step(action)
            if (task.digest(), result.reward, result.terminated) != (digest, reward, terminated):
                report.fail(
                    "snapshot_restore",
                    f"seed {seed}: after restore, {action} led to a different state or reward than before",
                )
                break


def _json_copy(value: Any) -> Any:
    """A deep, comparable copy of JSON-like data (fields may be mutated in place by a task)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))
