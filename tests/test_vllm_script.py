"""``scripts/vllm-server.sh``: the user chooses the tool-call parser, reasoning parser and chat
template (by model family or one by one), bad choices fail before anything is installed.

``--print-command`` prints the server command without installing or starting anything, so
these run in the default suite; that vLLM 0.32 knows every family's parser names is checked
against the installed vLLM's registries (marker ``llm``, like the server tests).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "vllm-server.sh"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    model = tmp_path / "my model"  # a path with a space
    model.mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", str(SCRIPT), "--model", str(model), "--print-command", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HARNESS_GYM_VLLM_VENV": str(tmp_path / "venv")},
    )


def families() -> dict[str, tuple[str, str]]:
    """The family table of ``--help``: family -> (tool-call parser, reasoning parser)."""
    text = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True).stdout
    table = text.split("Families", 1)[1].splitlines()[2:]
    rows = [line.split() for line in table if line.strip()]
    return {r[0]: (r[1], r[2]) for r in rows}


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_help_lists_the_five_families_the_issue_names() -> None:
    table = families()
    assert {"llama3", "mistral", "qwen3", "gpt-oss", "deepseek-r1", "deepseek-v31"} <= set(table)
    assert table["qwen3"] == ("hermes", "qwen3") and table["gpt-oss"] == ("openai", "openai_gptoss")


@pytest.mark.parametrize("family", sorted(families()))
def test_a_family_sets_its_parsers(tmp_path: Path, family: str) -> None:
    done = run(tmp_path, "--family", family)
    assert done.returncode == 0, done.stderr
    argv = done.stdout.splitlines()
    tools, reasoning = families()[family]
    assert option(argv, "--tool-call-parser") == tools and "--enable-auto-tool-choice" in argv
    assert option(argv, "--reasoning-parser") == (None if reasoning == "-" else reasoning)
    assert option(argv, "--model") == str(tmp_path / "my model")


def test_the_default_is_hermes_without_reasoning(tmp_path: Path) -> None:
    argv = run(tmp_path).stdout.splitlines()
    assert option(argv, "--tool-call-parser") == "hermes" and "--reasoning-parser" not in argv


def test_single_choices_override_the_family(tmp_path: Path) -> None:
    template = tmp_path / "tmpl.jinja"
    template.write_text("{{ messages }}")
    argv = run(
        tmp_path,
        "--family",
        "qwen3",
        "--tool-call-parser",
        "qwen3_xml",
        "--reasoning-parser",
        "none",
        "--chat-template",
        str(template),
    ).stdout.splitlines()
    assert option(argv, "--tool-call-parser") == "qwen3_xml" and "--reasoning-parser" not in argv
    assert option(argv, "--chat-template") == str(template)


def test_no_tools_drops_tool_calling(tmp_path: Path) -> None:
    argv = run(tmp_path, "--family", "deepseek-r1", "--no-tools").stdout.splitlines()
    assert "--enable-auto-tool-choice" not in argv and "--tool-call-parser" not in argv
    assert option(argv, "--reasoning-parser") == "deepseek_r1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--family", "llama2"), "unknown --family 'llama2'; families: hermes llama3"),
        (("--tool-call-parser", "a b"), "parser name 'a b' is not a name"),
        (("--reasoning-parser", "x;rm"), "parser name 'x;rm' is not a name"),
        (("--reasoning-parser",), "--reasoning-parser needs a value"),
        (("--chat-template", "/no/such.jinja"), "chat template '/no/such.jinja' is not a file"),
    ],
)
def test_bad_choices_fail_before_installing(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = run(tmp_path, *args)
    assert done.returncode == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "venv").exists()  # nothing installed


def _vllm_site() -> Path:
    venv = Path(os.environ.get("HARNESS_GYM_VLLM_VENV") or ROOT / ".venv-vllm")
    found = sorted(venv.glob("lib/python3*/site-packages/vllm"))
    if not found:
        pytest.fail(f"no vLLM in {venv}: run scripts/vllm-server.sh --install-only")
    return found[0]


@pytest.mark.llm
def test_every_family_parser_is_registered_in_the_installed_vllm() -> None:
    site = _vllm_site()
    registered = {}
    for kind in ("tool_parsers", "reasoning"):
        source = (site / kind / "__init__.py").read_text()
        registered[kind] = set(re.findall(r'^\s{4}"([\w\-]+)": \(', source, re.M))
    for family, (tools, reasoning) in families().items():
        assert tools in registered["tool_parsers"], (family, tools)
        assert reasoning == "-" or reasoning in registered["reasoning"], (family, reasoning)
