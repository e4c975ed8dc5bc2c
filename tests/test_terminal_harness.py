"""Terminal options as part of the harness: spec, YAML, id, validation."""

from __future__ import annotations

import gymnasium as gym
import pytest

import harness_gym  # noqa: F401 - registers the ids
from harness_gym.core.harness import Harness, HarnessSpecError
from harness_gym.core.presets import PRESETS
from harness_gym.envs.terminal.options import TerminalOptions, harness_options, with_options
from harness_gym.envs.terminal.sandbox_view import bwrap_problem

needs_bwrap = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap unusable: {bwrap_problem()}"
)


def test_terminal_options_change_the_harness_id_and_defaults_do_not() -> None:
    base = PRESETS["Json"]
    persistent = with_options(base, {"shell": "persistent"})
    json_results = with_options(base, {"result_format": "json"})
    assert len({base.id, persistent.id, json_results.id}) == 3
    assert with_options(base, {"shell": "fresh", "keep": "both"}).id == base.id  # defaults drop out
    assert Harness(family_options={"terminal": {}}) == Harness()
    for name, preset in PRESETS.items():  # no generic preset's id moves
        assert Harness.from_dict(preset.to_dict()).id == preset.id, name
        assert "family_options" not in preset.to_dict(full=False)
    assert harness_options(persistent) == TerminalOptions(shell="persistent")
    both = with_options(persistent, TerminalOptions(result_format="xml"))
    assert harness_options(both) == TerminalOptions(shell="persistent", result_format="xml")


def test_terminal_options_round_trip_through_yaml_and_json() -> None:
    text = "obs_format: yaml\nfamily_options:\n  terminal: {shell: persistent, max_output_chars: 500}\n"
    h = Harness.from_yaml(text)
    assert h.family("terminal") == {"shell": "persistent", "max_output_chars": 500}
    assert Harness.from_yaml(h.to_yaml()) == h and Harness.from_json(h.to_json()).id == h.id
    assert h.to_dict(full=False)["family_options"] == {
        "terminal": {"shell": "persistent", "max_output_chars": 500}
    }


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"terminal": {"shell": "zsh"}}, "unknown level 'zsh' for terminal factor 'shell'"),
        ({"terminal": {"colour": True}}, "unknown terminal factor(s) ['colour']"),
        ({"terminal": {"max_output_chars": 3}}, "max_output_chars must be an integer >= 64"),
        ({"nosuchfamily": {}}, "unknown family 'nosuchfamily'"),
        ({"terminal": "persistent"}, "family_options.terminal must be a mapping"),
        ("terminal", "family_options must map family names to options"),
    ],
)
def test_bad_terminal_options_are_clear_errors(spec, needle) -> None:
    with pytest.raises(HarnessSpecError) as err:
        Harness(family_options=spec)
    assert needle in str(err.value)
    with pytest.raises(HarnessSpecError):
        Harness.from_yaml(f"family_options: {spec!r}\n".replace("'", '"'))


@needs_bwrap
def test_env_records_terminal_options_in_the_harness_id(tmp_path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text("family_options:\n  terminal: {result_format: json, show_cwd: false}\n")
    from_yaml = gym.make("harness_gym/TermSortUnique-v0", harness=str(path))
    from_kwarg = gym.make(
        "harness_gym/TermSortUnique-v0", terminal={"result_format": "json", "show_cwd": False}
    )
    plain = gym.make("harness_gym/TermSortUnique-v0")
    try:
        infos = [env.reset(seed=3)[1] for env in (from_yaml, from_kwarg, plain)]
        assert infos[0]["harness_id"] == infos[1]["harness_id"] != infos[2]["harness_id"]
        assert infos[2]["harness_id"] == PRESETS["Json"].id
        assert infos[0]["terminal"] == TerminalOptions(result_format="json", show_cwd=False).to_dict()
        assert len({i["state_digest"] for i in infos}) == 1
        obs, *_ = from_yaml.step('{"name": "run", "arguments": {"command": "true"}}')
        assert '"exit_code": 0' in obs and '"cwd"' not in obs
        infos[0]["harness"]["family_options"]["terminal"]["shell"] = "changed"  # infos are copies
        assert from_yaml.unwrapped.harness.family("terminal").get("shell") is None
    finally:
        for env in (from_yaml, from_kwarg, plain):
            env.close()
