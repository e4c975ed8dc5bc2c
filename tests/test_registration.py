"""Gymnasium ids: every registered id resolves in a plain ``gym.make`` after ``import harness_gym``.

Registration puts specs straight into Gymnasium's registry and binds no preset at import
(:func:`~harness_gym.core.presets.preset_applies`), so the binding is checked here instead:
every registered (task, harness) pair binds. ``tests/test_plugins.py`` checks a plugin's ids.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

import harness_gym
from harness_gym.core.harness import Harness, HarnessSpecError
from harness_gym.core.presets import DEPRECATED_PRESETS, PRESETS
from harness_gym.core.registry import ENTRY_POINT, NAMESPACE, TASKS, get_task
from harness_gym.envs.terminal.presets import terminal_preset

REPO = Path(__file__).resolve().parents[1]


def package_specs() -> list[gym.envs.registration.EnvSpec]:
    """The (task, harness) pairs' ids (``harness_gym/Harbor-v0`` takes a task folder instead)."""
    from harness_gym.envs.terminal.catalog import HARBOR_ENV_ID

    return [
        spec for spec in gym.registry.values() if spec.namespace == NAMESPACE and spec.id != HARBOR_ENV_ID
    ]


def test_every_registered_pair_binds() -> None:
    specs = package_specs()
    assert len(specs) > 5000
    checked: dict[tuple, str | None] = {}
    failures = []
    for spec in specs:
        task_id, name = spec.kwargs["task"], spec.kwargs["harness"]
        if isinstance(task_id, type):  # a task folder registered by register_harbor (a test may have)
            task = task_id
        else:
            task = TASKS[task_id] if task_id in TASKS else get_task(task_id)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the deprecated preset names
            harness = PRESETS.get(DEPRECATED_PRESETS.get(name, name)) or terminal_preset(name)
        key = (harness, task.field_names, task.action_specs)
        if key not in checked:
            try:
                harness.bind(task.field_names, task.action_specs)
                checked[key] = None
            except HarnessSpecError as err:
                checked[key] = str(err)
        if checked[key] is not None:
            failures.append(f"{spec.id}: {checked[key]}")
    assert not failures, "\n".join(failures[:20])


def test_preset_less_and_deprecated_ids_stay_registered() -> None:
    assert "harness_gym/ClickButton-v0" in gym.registry
    for old in DEPRECATED_PRESETS:
        assert f"harness_gym/ClickButton-{old}-v0" in gym.registry
    spec = gym.spec("harness_gym/ClickButton-ObsYaml-v0")
    assert spec.entry_point == ENTRY_POINT and spec.kwargs == {"task": "ClickButton", "harness": "ObsYaml"}


def test_a_sample_of_every_family_resolves_in_plain_gym_make_in_a_fresh_process() -> None:
    """A fresh interpreter that imports only gymnasium and harness_gym builds envs of every
    family: web (every preset of one task), real browser and terminal (built, not started)."""
    web = [i for i in gym.registry if i.startswith("harness_gym/ClickButton-")]
    sample = [
        *web,
        "harness_gym/EnterText-Json-v0",
        "harness_gym/BrowserClickButton-v0",
        "harness_gym/BrowserClickButton-BrowserGymStyle-v0",
        "harness_gym/BrowserEnterText-ObsAxtree-v0",
        "harness_gym/TermSortUnique-v0",
        "harness_gym/TermSortUnique-MiniSweAgentStyle-v0",
        "harness_gym/TermGitCommit-ToolsXml-v0",
    ]
    code = (
        "import json, sys, warnings\n"
        "import gymnasium as gym\n"
        "import harness_gym\n"
        "warnings.simplefilter('ignore')\n"
        "out = {}\n"
        "for env_id in json.loads(sys.argv[1]):\n"
        "    env = gym.make(env_id)\n"
        "    out[env_id] = [env.unwrapped.task.task_id, env.unwrapped.harness.id]\n"
        "    env.close()\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(sample)], capture_output=True, text=True, env=env, timeout=600
    )
    if "SandboxUnavailable" in result.stderr:
        pytest.skip("bubblewrap cannot run here: " + result.stderr.strip().splitlines()[-1])
    assert result.returncode == 0, result.stderr
    made = json.loads(result.stdout)
    assert sorted(made) == sorted(sample)
    for env_id, (task_id, harness_id) in made.items():
        spec = gym.spec(env_id)
        assert task_id == spec.kwargs["task"], env_id
        assert len(harness_id) > 0
    assert made["harness_gym/ClickButton-JsonReversed-v0"][1] == PRESETS["JsonReversed"].id
    assert made["harness_gym/ClickButton-v0"][1] == Harness().id


def test_the_package_facade_keeps_its_names() -> None:
    for name in harness_gym.__all__:
        assert getattr(harness_gym, name) is not None


def test_the_quick_look_for_plugins_finds_a_declared_group_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``import harness_gym`` skips importlib.metadata unless some distribution declares a
    harness_gym group; the look must never miss one importlib.metadata would find."""
    from importlib import metadata

    from harness_gym.core.plugins import _may_declare

    site = tmp_path / "site"
    info = site / "some_pkg-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: some-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[console_scripts]\nsome = some_pkg:main\n")
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing")])
    assert not _may_declare("harness_gym.tasks") and _may_declare("console_scripts")
    assert not metadata.entry_points(group="harness_gym.tasks")
    (info / "entry_points.txt").write_text("[harness_gym.tasks]\nSome = some_pkg:SomeTask\n")
    assert _may_declare("harness_gym.tasks")
    assert [e.name for e in metadata.entry_points(group="harness_gym.tasks")] == ["Some"]
    (tmp_path / "bundle.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # a zip it cannot look into
    monkeypatch.setattr(sys, "path", [str(tmp_path / "bundle.zip")])
    assert _may_declare("harness_gym.tasks")


def test_import_harness_gym_imports_no_browser_task_and_registers_the_same_ids() -> None:
    """The real-browser ids come from the catalog; making the classes registers nothing new."""
    code = (
        "import json, sys\n"
        "import gymnasium as gym\n"
        "import harness_gym\n"
        "lazy = sorted(i for i in gym.registry if i.startswith('harness_gym/Browser'))\n"
        "heavy = ['harness_gym.envs.browser.tasks', 'xml.sax.saxutils', 'importlib.metadata']\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "import harness_gym.envs.browser as b\n"
        "eager = sorted(b.register(add_to_task_registry=True))\n"
        "print(json.dumps({'heavy': heavy, 'lazy': lazy, 'eager': eager, 'n': len(b.BROWSER_TASKS)}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["heavy"] == []
    assert out["n"] > 90 and len(out["eager"]) > 30 * out["n"]
    deprecated = {i for i in out["lazy"] if i.rsplit("-", 2)[-2] in DEPRECATED_PRESETS}
    assert deprecated and sorted(set(out["lazy"]) - deprecated) == out["eager"]


def test_family_env_ids_list_each_preset_id_once_and_no_preset_less_id() -> None:
    from harness_gym.core.registry import FAMILY_ENV_IDS

    assert len(FAMILY_ENV_IDS) == len(set(FAMILY_ENV_IDS)) > 3000
    assert all(i.count("-") >= 2 and i in gym.registry for i in FAMILY_ENV_IDS)
    assert "harness_gym/TermSortUnique-MiniSweAgentStyle-v0" in FAMILY_ENV_IDS
    assert not {i for i in FAMILY_ENV_IDS if i.rsplit("-", 2)[-2] in DEPRECATED_PRESETS}
