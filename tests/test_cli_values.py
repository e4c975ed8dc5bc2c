"""CLI values that pass a loose check and fail later (or never) are refused up front: one line
``harness-gym: error: ...``, exit code 2, no traceback, nothing written and nothing lost.
Mistakes in a user's own agent code are user errors (exit 2), not internal bugs (exit 3); an
output file the OS refuses is refused before any episode runs; options that would be ignored
(``--constrain`` with no language-model agent, terminal options on a web task) are refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from harness_gym.cli import main

ENV = "harness_gym/ClickButton-Json-v0"
GRPO = ["train", "--algo", "grpo-lm", "--env", ENV, "--out", "@TMP/out-grpo"]
EVAL = ["eval", "--env", ENV, "--episodes", "1"]
SWEEP = ["sweep", "--agent", "random", "--tasks", "ClickButton", "--seeds", "1", "--workers", "0", "--quiet"]
SWEEP_OUT = [*SWEEP, "--no-ceiling", "--out", "@TMP/out-sweep"]

FILES = {
    "agent_syntax.py": "def make(env):\n    return (\n",
    "agent_raises.py": "raise RuntimeError('agent file broke on import')\n",
    "agent_factory_raises.py": "def make(env):\n    raise ValueError('the factory broke')\n",
    "cache_file": "not a folder\n",
    "terminal.yaml": "family_options:\n  terminal:\n    shell: persistent\n",
}

CASES = [
    ("lr-nan", [*GRPO, "--learning-rate", "nan"], "--learning-rate: must be a finite number"),
    ("lr-inf", [*GRPO, "--learning-rate", "inf"], "--learning-rate: must be a finite number"),
    ("lr-zero", [*GRPO, "--learning-rate", "0"], "--learning-rate: must be > 0"),
    ("beta-nan", [*GRPO, "--beta", "nan"], "--beta: must be a finite number"),
    ("beta-negative", [*GRPO, "--beta", "-1"], "--beta: must be >= 0"),
    ("temperature-inf", [*GRPO, "--temperature", "inf"], "--temperature: must be a finite number"),
    ("temperature-nan", [*GRPO, "--temperature", "nan"], "--temperature: must be a finite number"),
    ("seed-start-negative", [*GRPO, "--train-seed-start", "-5"], "--train-seed-start: must be >= 0"),
    ("lora-negative", [*GRPO, "--lora-r", "-1"], "--lora-r: must be >= 0"),
    ("eval-temperature-inf", [*EVAL, "--agent", "llm?temperature=inf"], "finite number"),
    ("eval-temperature-nan", [*EVAL, "--agent", "llm?temperature=nan"], "finite number"),
    ("eval-top-p-nan", [*EVAL, "--agent", "llm?top_p=nan"], "finite number"),
    ("eval-timeout-inf", [*EVAL, "--agent", "openai:m@http://127.0.0.1:9/v1?timeout=inf"], "finite number"),
    ("eval-max-tokens-underscore", [*EVAL, "--agent", "llm?max_tokens=4_8"], "expected an integer"),
    ("eval-device-bogus", [*EVAL, "--agent", "llm?device=bogus"], "device must be a torch device"),
    ("eval-cache-file", [*EVAL, "--agent", "llm?cache=@TMP/cache_file"], "cache must be a folder"),
    ("eval-cache-under-file", [*EVAL, "--agent", "llm?cache=@TMP/cache_file/sub"], "cache must be a folder"),
    ("eval-cli-temperature-nan", [*EVAL, "--agent", "llm", "--temperature", "nan"], "finite number"),
    ("episodes-underscore", [*EVAL, "--episodes", "1_0"], "expected an integer, got '1_0'"),
    ("episodes-arabic-digit", [*EVAL, "--episodes", "\u0662"], "expected an integer"),
    ("seed-fullwidth-digit", [*EVAL, "--seed", "\uff11"], "expected an integer"),
    ("subset-empty", [*SWEEP_OUT, "--subset", ""], "bad --subset ''"),
    ("subset-colon", [*SWEEP_OUT, "--subset", "balanced:"], "bad --subset 'balanced:'"),
    ("subset-space", [*SWEEP_OUT, "--subset", "balanced: 2"], "bad --subset 'balanced: 2'"),
    ("subset-plus", [*SWEEP_OUT, "--subset", "balanced:2+"], "bad --subset 'balanced:2+'"),
    ("subset-underscore", [*SWEEP_OUT, "--subset", "balanced:2_0"], "N must be a positive integer"),
    ("subset-arabic-digit", [*SWEEP_OUT, "--subset", "balanced:\u0662"], "N must be a positive integer"),
    ("subset-fullwidth-digit", [*SWEEP_OUT, "--subset", "sample:\uff12"], "N must be a positive integer"),
    ("subset-flips-colon", [*SWEEP_OUT, "--subset", "flips:"], "bad --subset 'flips:'"),
    ("agent-file-syntax", [*EVAL, "--agent", "@TMP/agent_syntax.py:make"], "SyntaxError"),
    ("agent-file-raises", [*EVAL, "--agent", "@TMP/agent_raises.py:make"], "agent file broke on import"),
    ("agent-factory-raises", [*EVAL, "--agent", "@TMP/agent_factory_raises.py:make"], "the factory broke"),
    (
        "eval-out-proc",
        [*EVAL, "--agent", "random", "--out", "/proc/harness-gym-x.jsonl"],
        "cannot be written",
    ),
    (
        "constrain-no-llm",
        [*EVAL, "--agent", "random", "--constrain"],
        "--constrain applies to language-model",
    ),
    ("constrain-default-agents", [*EVAL, "--constrain"], "--constrain applies to language-model"),
    ("temperature-no-llm", [*EVAL, "--agent", "oracle", "--temperature", "0.5"], "--temperature applies"),
    ("sweep-constrain-no-llm", [*SWEEP_OUT, "--constrain"], "--constrain applies"),
    ("terminal-options-web-train", [*GRPO, "--harness", "@TMP/terminal.yaml"], "family_options for terminal"),
    (
        "terminal-options-web-sb3",
        ["train", "--env", ENV, "--out", "@TMP/out-sb3", "--harness", "@TMP/terminal.yaml"],
        "family_options for terminal",
    ),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli values")  # a path with a space
    for name, text in FILES.items():
        (root / name).write_text(text)
    return root


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as info:
        main(argv, out=out)
    captured = capsys.readouterr()
    return info.value.code, out.getvalue() + captured.out, captured.err  # type: ignore[return-value]


def _listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_value_is_refused_in_one_line_and_nothing_is_written(
    argv: list[str], message: str, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _listing(files)
    code, stdout, err = _run([a.replace("@TMP", str(files)) for a in argv], capsys)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness-gym: error: "), err
    assert message.replace("@TMP", str(files)) in lines[0], err
    assert "wrote" not in stdout and "Success rate" not in stdout  # no episode ran
    assert _listing(files) == before  # nothing written, nothing lost
    assert not Path("/proc/harness-gym-x.jsonl").exists()


def test_an_eval_out_file_is_checked_but_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("earlier rows\n")
    code, _, err = _run([*EVAL, "--agent", "random", "--constrain", "--out", str(rows)], capsys)
    assert code == 2 and rows.read_text() == "earlier rows\n"
    fresh = tmp_path / "new" / "rows.jsonl"
    code, _, err = _run([*EVAL, "--agent", "nope", "--out", str(fresh)], capsys)
    assert code == 2 and not fresh.exists()
    assert main([*EVAL, "--agent", "random", "--out", str(fresh)], out=io.StringIO()) == 0
    assert fresh.read_text().count("\n") == 1


@pytest.mark.parametrize("subset", ["balanced", "balanced:4", "sample:3", "covering", "balanced:4+flips"])
def test_good_subsets_still_run(subset: str) -> None:
    from harness_gym.analysis.sweep.spec import select_harnesses
    from harness_gym.core.space import DEFAULT_SPACE

    points, *_ = select_harnesses(DEFAULT_SPACE, subset)
    assert points


def test_good_llm_options_still_parse(files: Path) -> None:
    from harness_gym.llm.spec import parse_llm_spec

    spec = parse_llm_spec(f"llm?temperature=0.7&max_tokens=48&device=cuda:1&cache={files / 'new-cache'}")
    assert spec.options["device"] == "cuda:1" and spec.options["temperature"] == 0.7
    assert spec.options["max_tokens"] == 48
