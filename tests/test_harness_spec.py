"""The harness spec: validation, serialization round trips, stable ids, clear errors."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from harness_gym import PRESETS, Harness, HarnessSpecError, make_env, resolve_harness


@pytest.mark.parametrize("name", list(PRESETS))
def test_dict_json_yaml_round_trip(name: str) -> None:
    h = PRESETS[name]
    assert Harness.from_dict(h.to_dict()) == h
    assert Harness.from_json(h.to_json()) == h
    assert Harness.from_yaml(h.to_yaml()) == h
    assert Harness.from_dict(h.to_dict(full=False)) == h
    assert Harness.from_yaml(h.to_yaml()).id == h.id


def test_id_is_a_content_hash() -> None:
    a = Harness(obs_format="yaml", extra_fields=("last_error", "step"))
    b = Harness.from_dict({"extra_fields": ["step", "last_error"], "obs_format": "yaml"})
    assert a.id == b.id and a == b
    assert a.id != Harness().id
    # Spelling out a default leaves the id unchanged.
    assert Harness(obs_format="json").id == Harness().id
    assert len({h.id for h in PRESETS.values()}) == len(PRESETS)


def test_id_does_not_depend_on_process() -> None:
    assert Harness().id == "h-" + __import__("hashlib").sha256(b"{}").hexdigest()[:12]


def test_presets_cover_every_level_of_every_categorical_factor() -> None:
    from harness_gym.core.harness import LEVELS

    for factor, levels in LEVELS.items():
        seen = {getattr(h, factor) for h in PRESETS.values()}
        assert set(levels) <= seen, (factor, set(levels) - seen)
    assert {h.field_order for h in PRESETS.values()} >= {"canonical", "reversed"}
    assert {h.tool_order for h in PRESETS.values()} >= {"canonical", "reversed", "alphabetical"}
    assert {h.history_window for h in PRESETS.values()} >= {0, 1, "all"}
    assert {h.prompt_template for h in PRESETS.values()} >= {"default", "terse", "verbose"}
    assert set().union(*(h.extra_fields for h in PRESETS.values())) == {"step", "last_error"}


def test_unknown_preset_lists_valid_presets() -> None:
    with pytest.raises(HarnessSpecError, match="valid presets: .*'Json'"):
        resolve_harness("Jsn")
    with pytest.raises(HarnessSpecError, match="valid presets"):
        gym.make("harness_gym/ClickButton-v0", harness="NoSuchPreset")


def test_unknown_factor_lists_valid_factors() -> None:
    with pytest.raises(HarnessSpecError, match="unknown harness factor.*'colour'.*valid factors.*obs_format"):
        Harness.from_dict({"colour": "blue"})
    with pytest.raises(HarnessSpecError, match="valid factors"):
        Harness().replace(colour="blue")


@pytest.mark.parametrize(
    ("factor", "level"),
    [
        ("obs_format", "toml"),
        ("tool_style", "yaml"),
        ("tool_naming", "random"),
        ("parser", "loose"),
        ("invalid_action", "crash"),
        ("field_order", "sorted"),
        ("tool_order", "random"),
        ("tool_descriptions", "long"),
    ],
)
def test_unknown_level_lists_valid_levels(factor: str, level: str) -> None:
    with pytest.raises(
        HarnessSpecError, match=f"unknown level '{level}' for factor '{factor}'.*valid levels"
    ):
        Harness.from_dict({factor: level})


@pytest.mark.parametrize(
    "spec",
    [
        {"history_window": -1},
        {"history_window": "some"},
        {"step_budget": 0},
        {"step_budget": True},
        {"extra_fields": ["step", "step"]},
        {"extra_fields": ["clock"]},
        {"prompt_template": "no placeholder here"},
        {"field_order": ["title", "title"]},
    ],
)
def test_bad_values_raise_spec_errors(spec: dict) -> None:
    with pytest.raises(HarnessSpecError):
        Harness.from_dict(spec)


def test_field_permutation_is_checked_against_the_task() -> None:
    with pytest.raises(HarnessSpecError, match=r"missing \['page'\]"):
        make_env("ClickButton", {"field_order": ["title", "instruction"]})
    with pytest.raises(HarnessSpecError, match=r"unknown \['url'\]"):
        make_env("ClickButton", {"field_order": ["title", "instruction", "page", "url"]})
    env = make_env("ClickButton", {"field_order": ["title", "page", "instruction"]})
    obs, _ = env.reset(seed=0)
    data = json.loads(obs)
    assert list(data) == ["title", "page", "instruction"]


def test_tool_permutation_and_drop_are_checked_against_the_task() -> None:
    with pytest.raises(HarnessSpecError, match="tool_order must list each"):
        make_env("ClickButton", {"tool_order": ["click", "type"]})
    with pytest.raises(HarnessSpecError, match="drop_tools names unknown tools"):
        make_env("ClickButton", {"drop_tools": ["scroll"]})


def test_harness_accepts_every_form(tmp_path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(PRESETS["BundleXml"].to_yaml())
    for form in ("BundleXml", PRESETS["BundleXml"], PRESETS["BundleXml"].to_dict(), str(path), path):
        env = gym.make("harness_gym/ClickButton-v0", harness=form)
        _, info = env.reset(seed=1)
        assert info["harness_id"] == PRESETS["BundleXml"].id
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        resolve_harness(str(tmp_path / "missing.yaml"))
    with pytest.raises(TypeError, match="harness must be"):
        resolve_harness(3.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "names", "example"),
    [
        ({"drop_tools": "click"}, "drop_tools must be a list of names, got the string 'click'", r"\[click"),
        ({"extra_fields": "step"}, "extra_fields must be a list of names", r"\[step"),
        ({"drop_tools": [1]}, "drop_tools must be a list of names", r"\[click"),
        ({"rename_tools": "click"}, "rename_tools must map canonical names", r"\{click: tap\}"),
        ({"rename_args": ["ref"]}, "rename_args must map canonical names", r"\{ref: element\}"),
        ({"field_order": 3}, "field_order must be one of", r"\[instruction"),
        ({"tool_order": {"a": 1}}, "tool_order must be one of", r"\[type, click\]"),
        ({"obs_format": ["json"]}, "unknown level.*'obs_format'", "obs_format: json"),
        ({"max_action_chars": True}, "max_action_chars must be an integer", "max_action_chars: 4096"),
        ({"few_shot": "2"}, "few_shot must be an integer", "few_shot: 2"),
    ],
)
def test_wrong_types_name_the_factor_and_show_an_example(spec: dict, names: str, example: str) -> None:
    """A string where a list belongs is an error, never split into one-letter names."""
    with pytest.raises(HarnessSpecError, match=names) as caught:
        Harness.from_dict(spec)
    assert __import__("re").search(r"e\.g\. .*" + example, str(caught.value)), str(caught.value)


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ('Reply like {"name": "click"}. Tools: {tools}', "unknown placeholder"),
        ("Tools: {tools} }", "stray brace"),
        ("Tools: {tools", "stray brace"),
        ("Tools: {tools:>10}", "format spec"),
        ("Tools: {tools!r}", "format spec or conversion"),
        ("Tools: {0} {tools}", "unknown placeholder"),
        ("no tools placeholder {format}", "lacks"),
        (42, "must be text"),
    ],
)
def test_custom_prompt_templates_with_braces_fail_at_construction(template: object, problem: str) -> None:
    with pytest.raises(HarnessSpecError, match=f"prompt_template.*{problem}.*e\\.g\\. prompt_template"):
        Harness(prompt_template=template)  # type: ignore[arg-type]


def test_a_template_with_doubled_braces_renders_them_literally() -> None:
    h = Harness(prompt_template='Reply as {{"name": <tool>}} in {format}.\n{tools}\n{format_hint}')
    _, info = make_env("ClickButton", h).reset(seed=0)
    assert info["system_prompt"].startswith('Reply as {"name": <tool>} in JSON.\n- {"name": "click"')


def test_spec_files_that_are_not_mappings_or_not_yaml_are_spec_errors(tmp_path) -> None:
    for name, data in [
        ("list.yaml", b"- obs_format\n- yaml\n"),
        ("bad.yaml", b"obs_format: [json\n"),
        ("latin.yaml", "obs_format: jsön\n".encode("latin-1")),
    ]:
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(HarnessSpecError, match="mapping|not valid YAML|not UTF-8"):
            resolve_harness(path)
