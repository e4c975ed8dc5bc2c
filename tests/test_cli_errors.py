"""Every ordinary mistake on the command line ends in one line, ``harness-gym: error: ...``, exit
code 2 and no traceback, for every verb; nothing the user had is lost.

The table runs the real entry point (``harness_gym.cli.main``); a few rows run the installed
``harness-gym`` console script in a subprocess. ``@TMP`` in an argument is a folder of prepared
files (malformed, non-UTF-8 or wrongly shaped harness, space and model files).
"""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness_gym.cli import main
from harness_gym.cli.common import CommandError

ENV = "harness_gym/ClickButton-Json-v0"
UNWRITABLE = "/sys/harness-gym-cannot-write-here"  # mkdir fails even as root
WRITE_ERROR = "cannot be written"
HARNESS_FILES = {
    "bad.yaml": "obs_format: [json\n",
    "latin1.yaml": b"obs_format: \xe9t\xe9\n",
    "list.yaml": "- obs_format\n- yaml\n",
    "unknown_factor.yaml": "obs_fromat: yaml\n",
    "unknown_level.yaml": "obs_format: toml\n",
    "string_tuple.yaml": "drop_tools: click\n",
    "braces.yaml": "prompt_template: 'Tools: {tools}. Answer {like this}'\n",
}
SPACE_FILES = {
    "space_bad.yaml": "factors:\n  obs_format: [json, yaml\n",
    "space_latin1.yaml": b"factors:\n  obs_format: [\xe9]\n",
    "space_list.yaml": "- factors\n",
    "space_factors_list.yaml": "factors: [obs_format, tool_style]\n",
    "space_unknown_factor.yaml": "factors:\n  obs_fromat: [json, yaml]\n",
    "space_unknown_level.yaml": "factors:\n  obs_format: [json, toml]\n",
}
GOOD_RUN = {"algo": "ppo", "task_id": "ClickButton", "harness": {}, "harness_id": "x"}
MODEL_FILES = {
    "model_badjson/run.json": '{"algo": "ppo",',
    "model_list/run.json": "[1, 2]",
    "model_latin1/run.json": b'{"algo": "\xe9"}',
    "model_missing/run.json": '{"algo": "ppo"}',
    "model_badharness/run.json": json.dumps({**GOOD_RUN, "harness": {"obs_fromat": "json"}}),
    "model_harness_list/run.json": json.dumps({**GOOD_RUN, "harness": ["json"]}),
    "model_text_missing/run.json": json.dumps({"algo": "text_policy", "task_id": "ClickButton"}),
    "model_ok/run.json": json.dumps(GOOD_RUN),
    "model_dir_run/run.json/x": "",
}
SWEEP_FILES = {
    "sweep_corrupt/sweep.json": "{",
    "sweep_list/sweep.json": "[]",
    "sweep_latin1/sweep.json": b"\xff\xfe{}",
    "sweep_fake/sweep.json": "{}",
}
OTHER_FILES = {"file.txt": "a regular file\n", "adir/keep.txt": "kept\n", "dir.yaml/keep.txt": "kept\n"}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-errors")
    for name, content in {
        **HARNESS_FILES,
        **SPACE_FILES,
        **MODEL_FILES,
        **SWEEP_FILES,
        **OTHER_FILES,
    }.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    (root / "empty_dir").mkdir()
    return root


TRAIN = ["train", "--env", ENV, "--out", "@TMP/out-train"]
EVAL = ["eval", "--env", ENV, "--episodes", "1"]
MODEL = ["eval", "--env", ENV, "--episodes", "1", "--model"]
CHECK = ["check", "--task", "ClickButton", "--seeds", "1", "--harness"]
SWEEP = ["sweep", "--agent", "random", "--tasks", "ClickButton", "--seeds", "1", "--workers", "0", "--quiet"]
SWEEP_OUT = [*SWEEP, "--out", "@TMP/out-sweep"]

# (id, argv, a piece of the expected message)
CASES: list[tuple[str, list[str], str]] = [
    # the top-level parser
    ("no-verb", [], "arguments are required: command"),
    ("unknown-verb", ["lsit"], "invalid choice: 'lsit'"),
    ("unknown-global-flag", ["--bogus", "list"], "unrecognized arguments: --bogus"),
    # list
    ("list-bad-what", ["list", "everything"], "invalid choice: 'everything'"),
    ("list-extra-arg", ["list", "envs", "more"], "unrecognized arguments: more"),
    ("list-bad-family", ["list", "envs", "--family", "nope"], "--family: unknown family 'nope'; families: "),
    # play
    ("play-no-env", ["play"], "the following arguments are required: env_id"),
    ("play-unknown-env", ["play", "harness_gym/NoSuchTask-Json-v0"], "unknown env id"),
    ("play-unknown-preset", ["play", "harness_gym/ClickButton-NoSuchPreset-v0"], "unknown env id"),
    ("play-bare-name", ["play", "ClickButton"], "unknown env id 'ClickButton'"),
    ("play-negative-seed", ["play", ENV, "--seed", "-1"], "--seed: must be >= 0"),
    ("play-text-seed", ["play", ENV, "--seed", "three"], "expected an integer, got 'three'"),
    # eval
    ("eval-no-env", ["eval"], "the following arguments are required: --env"),
    ("eval-unknown-env", ["eval", "--env", "harness_gym/NoSuchTask-Json-v0"], "unknown env id"),
    ("eval-unmatched-glob", ["eval", "--env", "harness_gym/Nothing*"], "no registered env matches"),
    ("eval-unknown-agent", [*EVAL, "--agent", "genius"], "unknown agent 'genius'"),
    ("eval-agent-file-missing", [*EVAL, "--agent", "@TMP/nowhere.py:Agent"], "nowhere.py"),
    ("eval-zero-episodes", [*EVAL, "--episodes", "0"], "--episodes: must be >= 1, got 0"),
    ("eval-negative-episodes", [*EVAL, "--episodes", "-3"], "--episodes: must be >= 1, got -3"),
    ("eval-text-episodes", [*EVAL, "--episodes", "many"], "expected an integer"),
    ("eval-negative-seed", [*EVAL, "--seed", "-5"], "--seed: must be >= 0"),
    ("eval-negative-temperature", [*EVAL, "--temperature", "-1"], "--temperature: must be >= 0"),
    ("eval-zero-max-tokens", [*EVAL, "--max-tokens", "0"], "--max-tokens: must be > 0"),
    ("eval-zero-in-flight", [*EVAL, "--in-flight", "0"], "--in-flight: must be > 0"),
    ("eval-bad-llm-option", [*EVAL, "--agent", "llm?temprature=1"], "temprature"),
    ("eval-stochastic-without-model", [*EVAL, "--stochastic"], "--stochastic applies to --model only"),
    ("eval-unknown-harness", [*EVAL, "--harness", "NoSuchPreset"], "NoSuchPreset"),
    ("eval-out-under-file", [*EVAL, "--out", "@TMP/file.txt/rows.jsonl"], "which is a file"),
    ("eval-out-is-dir", [*EVAL, "--out", "@TMP/adir"], "is a folder"),
    ("eval-out-unwritable", [*EVAL, "--out", f"{UNWRITABLE}/rows.jsonl"], WRITE_ERROR),
    # eval --model
    ("model-missing", [*MODEL, "@TMP/nowhere"], "is not a model directory"),
    ("model-empty-dir", [*MODEL, "@TMP/empty_dir"], "is not a model directory"),
    ("model-is-file", [*MODEL, "@TMP/file.txt"], "is not a model directory"),
    ("model-run-json-is-dir", [*MODEL, "@TMP/model_dir_run"], "is not a model directory"),
    ("model-bad-json", [*MODEL, "@TMP/model_badjson"], "is corrupt: not valid JSON"),
    ("model-json-list", [*MODEL, "@TMP/model_list"], "is corrupt: a JSON list"),
    ("model-not-utf8", [*MODEL, "@TMP/model_latin1"], "is corrupt: not UTF-8"),
    ("model-missing-keys", [*MODEL, "@TMP/model_missing"], "is corrupt: missing ['task_id', 'harness']"),
    ("model-bad-harness", [*MODEL, "@TMP/model_badharness"], "is corrupt: unknown harness factor"),
    ("model-harness-not-mapping", [*MODEL, "@TMP/model_harness_list"], "is corrupt: harness specs"),
    ("model-text-policy-keys", [*MODEL, "@TMP/model_text_missing"], "missing ['harnesses']"),
    ("model-unknown-env", ["eval", "--env", "Nope-v0", "--model", "@TMP/model_ok"], "unknown env id"),
    ("model-unknown-preset", [*MODEL, "@TMP/model_ok", "--harness", "Jsn"], "unknown harness preset 'Jsn'"),
    ("model-harness-yaml-bad", [*MODEL, "@TMP/model_ok", "--harness", "@TMP/bad.yaml"], "not valid YAML"),
    ("model-out-is-dir", [*MODEL, "@TMP/model_ok", "--out", "@TMP/adir"], "is a folder"),
    # train (every argument is checked before torch is imported)
    ("train-no-args", ["train"], "the following arguments are required: --env, --out"),
    ("train-unknown-env", ["train", "--env", "Nope-v0", "--out", "@TMP/o"], "unknown env id 'Nope-v0'"),
    ("train-unknown-algo", [*TRAIN, "--algo", "a2c"], "invalid choice: 'a2c'"),
    ("train-zero-steps", [*TRAIN, "--steps", "0"], "--steps: must be >= 1"),
    ("train-negative-steps", [*TRAIN, "--steps", "-100"], "--steps: must be >= 1"),
    ("train-negative-seed", [*TRAIN, "--seed", "-1"], "--seed: must be >= 0"),
    ("train-zero-envs", [*TRAIN, "--n-envs", "0"], "--n-envs: must be >= 1"),
    ("train-zero-iterations", [*TRAIN, "--iterations", "0"], "--iterations: must be >= 1"),
    ("train-zero-threads", [*TRAIN, "--threads", "0"], "--threads: must be >= 1"),
    ("train-negative-eval", [*TRAIN, "--eval-episodes", "-1"], "--eval-episodes: must be >= 0"),
    ("train-zero-actions", [*TRAIN, "--max-actions", "0"], "--max-actions: must be >= 1"),
    ("train-negative-menu", [*TRAIN, "--menu-dim", "-8"], "--menu-dim: must be >= 0"),
    (
        "train-hyperparams-not-json",
        [*TRAIN, "--hyperparams", "{lr: 1"],
        "--hyperparams must be a JSON object",
    ),
    ("train-hyperparams-list", [*TRAIN, "--hyperparams", "[1]"], "JSON object, got list"),
    (
        "train-two-envs-sb3",
        [*TRAIN, "--algo", "ppo", "--env", "harness_gym/ClickLink-Json-v0"],
        "every --env must be the same task",
    ),
    ("train-unknown-preset", [*TRAIN, "--harness", "NoSuchPreset"], "unknown harness preset"),
    ("train-harness-missing", [*TRAIN, "--harness", "@TMP/nowhere.yaml"], "not found"),
    ("train-harness-bad-yaml", [*TRAIN, "--harness", "@TMP/bad.yaml"], "is not valid YAML"),
    ("train-harness-not-utf8", [*TRAIN, "--harness", "@TMP/latin1.yaml"], "is not UTF-8"),
    ("train-harness-list", [*TRAIN, "--harness", "@TMP/list.yaml"], "must be a mapping"),
    ("train-out-is-file", ["train", "--env", ENV, "--out", "@TMP/file.txt"], "is a file"),
    ("train-out-under-file", ["train", "--env", ENV, "--out", "@TMP/file.txt/run"], "which is a file"),
    ("train-out-unwritable", ["train", "--env", ENV, "--out", f"{UNWRITABLE}/run"], WRITE_ERROR),
    # check
    ("check-unknown-task", ["check", "--task", "Nope"], "unknown task 'Nope'"),
    ("check-zero-seeds", ["check", "--seeds", "0"], "--seeds: must be >= 1"),
    ("check-negative-seeds", ["check", "--seeds", "-2"], "--seeds: must be >= 1"),
    ("check-unknown-preset", [*CHECK, "Jsonn"], "unknown harness preset 'Jsonn'"),
    ("check-harness-missing", [*CHECK, "@TMP/nowhere.yaml"], "not found"),
    ("check-harness-bad-yaml", [*CHECK, "@TMP/bad.yaml"], "is not valid YAML"),
    ("check-harness-not-utf8", [*CHECK, "@TMP/latin1.yaml"], "is not UTF-8"),
    ("check-harness-list", [*CHECK, "@TMP/list.yaml"], "must be a mapping"),
    ("check-harness-unknown-factor", [*CHECK, "@TMP/unknown_factor.yaml"], "unknown harness factor"),
    ("check-harness-unknown-level", [*CHECK, "@TMP/unknown_level.yaml"], "toml"),
    ("check-harness-string-tuple", [*CHECK, "@TMP/string_tuple.yaml"], "drop_tools"),
    ("check-harness-braces", [*CHECK, "@TMP/braces.yaml"], "prompt_template"),
    ("check-harness-is-dir", [*CHECK, "@TMP/dir.yaml"], "Is a directory"),
    ("train-harness-is-dir", [*TRAIN, "--harness", "@TMP/dir.yaml"], "Is a directory"),
    ("check-space-missing", [*CHECK, "balanced:@TMP/nowhere.yaml"], "nowhere.yaml"),
    ("check-space-is-dir", [*CHECK, "balanced:@TMP/adir"], "adir"),
    ("check-space-bad-yaml", [*CHECK, "balanced:@TMP/space_bad.yaml"], "is not valid YAML"),
    ("check-space-not-utf8", [*CHECK, "covering:@TMP/space_latin1.yaml"], "is not UTF-8"),
    ("check-space-list", [*CHECK, "balanced:@TMP/space_list.yaml"], "got a list"),
    ("check-space-factors-list", [*CHECK, "covering:@TMP/space_factors_list.yaml"], "got a list"),
    ("check-space-unknown-factor", [*CHECK, "balanced:@TMP/space_unknown_factor.yaml"], "obs_fromat"),
    ("check-space-unknown-level", [*CHECK, "balanced:@TMP/space_unknown_level.yaml"], "toml"),
    # sweep
    ("sweep-no-args", ["sweep"], "the following arguments are required: --agent, --out"),
    ("sweep-unknown-agent", ["sweep", "--agent", "nope", "--out", "@TMP/o"], "unknown agent 'nope'"),
    ("sweep-unknown-task", [*SWEEP_OUT, "--tasks", "Nope"], "unknown task(s) ['Nope']"),
    ("sweep-space-missing", [*SWEEP_OUT, "--space", "@TMP/nowhere.yaml"], "file not found"),
    ("sweep-space-bad-yaml", [*SWEEP_OUT, "--space", "@TMP/space_bad.yaml"], "is not valid YAML"),
    ("sweep-space-not-utf8", [*SWEEP_OUT, "--space", "@TMP/space_latin1.yaml"], "is not UTF-8"),
    ("sweep-space-list", [*SWEEP_OUT, "--space", "@TMP/space_list.yaml"], "got a list"),
    ("sweep-space-unknown-level", [*SWEEP_OUT, "--space", "@TMP/space_unknown_level.yaml"], "toml"),
    ("sweep-bad-subset", [*SWEEP_OUT, "--subset", "bogus:3"], "bogus"),
    ("sweep-zero-seeds", [*SWEEP_OUT, "--seeds", "0"], "--seeds: must be >= 1"),
    ("sweep-negative-seeds", [*SWEEP_OUT, "--seeds", "-1"], "--seeds: must be >= 1"),
    ("sweep-negative-first-seed", [*SWEEP_OUT, "--first-seed", "-1"], "--first-seed: must be >= 0"),
    ("sweep-negative-workers", [*SWEEP_OUT, "--workers", "-1"], "--workers: must be >= 0"),
    ("sweep-zero-node-limit", [*SWEEP_OUT, "--node-limit", "0"], "--node-limit: must be >= 1"),
    ("sweep-zero-chunk", [*SWEEP_OUT, "--chunk-size", "0"], "--chunk-size: must be >= 1"),
    ("sweep-unknown-backend", [*SWEEP_OUT, "--backend", "slurm"], "invalid choice: 'slurm'"),
    ("sweep-negative-temperature", [*SWEEP_OUT, "--temperature", "-0.5"], "--temperature: must be >= 0"),
    ("sweep-out-is-file", [*SWEEP, "--out", "@TMP/file.txt"], "is a file"),
    ("sweep-out-under-file", [*SWEEP, "--out", "@TMP/file.txt/sweep"], "which is a file"),
    ("sweep-out-unwritable", [*SWEEP, "--out", f"{UNWRITABLE}/sweep"], WRITE_ERROR),
    # report
    ("report-no-dir", ["report"], "the following arguments are required: dir"),
    ("report-missing", ["report", "@TMP/nowhere"], "is not a sweep folder"),
    ("report-is-file", ["report", "@TMP/file.txt"], "is not a sweep folder"),
    ("report-empty-dir", ["report", "@TMP/empty_dir"], "is not a sweep folder"),
    ("report-corrupt-meta", ["report", "@TMP/sweep_corrupt"], "is corrupt"),
    ("report-meta-list", ["report", "@TMP/sweep_list"], "is corrupt (a list"),
    ("report-meta-not-utf8", ["report", "@TMP/sweep_latin1"], "is corrupt"),
    ("report-out-is-file", ["report", "@TMP/sweep_fake", "--out", "@TMP/file.txt"], "is a file"),
    ("report-out-unwritable", ["report", "@TMP/sweep_fake", "--out", f"{UNWRITABLE}/r"], WRITE_ERROR),
    # --debug changes nothing for a bad command line
    ("debug-bad-count", ["--debug", *EVAL, "--episodes", "0"], "--episodes: must be >= 1"),
    ("debug-after-verb", [*EVAL, "--debug", "--seed", "-1"], "--seed: must be >= 0"),
]


def _argv(argv: list[str], root: Path) -> list[str]:
    return [a.replace("@TMP", str(root)) for a in argv]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as info:
        main(argv, out=out)
    captured = capsys.readouterr()
    return info.value.code, out.getvalue() + captured.out, captured.err  # type: ignore[return-value]


def test_the_table_covers_every_verb() -> None:
    assert len(CASES) >= 60 and len({c[0] for c in CASES}) == len(CASES)
    verbs = {argv[0] for _, argv, _ in CASES if argv and not argv[0].startswith("-")}
    assert {"list", "play", "eval", "check", "sweep", "report", "train"} <= verbs


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error_is_one_line_exit_2(
    argv: list[str], message: str, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(_argv(argv, files), capsys)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("harness-gym: error: "), err
    assert message.replace("@TMP", str(files)) in lines[0], err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["play", "harness_gym/NoSuchTask-Json-v0"], "unknown env id"),
        ([*EVAL, "--episodes", "0"], "--episodes: must be >= 1"),
        ([*CHECK, "@TMP/latin1.yaml"], "is not UTF-8"),
        (["report", "@TMP/nowhere"], "is not a sweep folder"),
        ([*MODEL, "@TMP/model_badjson"], "is corrupt"),
    ],
)
def test_console_script_errors(argv: list[str], message: str, files: Path) -> None:
    script = Path(sys.executable).with_name("harness-gym")
    proc = subprocess.run([str(script), *_argv(argv, files)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("harness-gym: error: ")
    assert message.replace("@TMP", str(files)) in proc.stderr


def test_debug_shows_the_traceback(files: Path) -> None:
    with pytest.raises(CommandError, match="unknown env id"):
        main(["--debug", "play", "harness_gym/NoSuchTask-Json-v0"], out=io.StringIO())
    script = Path(sys.executable).with_name("harness-gym")
    proc = subprocess.run(
        [str(script), "--debug", "check", "--harness", str(files / "bad.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "HarnessSpecError" in proc.stderr


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sweep")
    argv = [*SWEEP, "--subset", "balanced:4", "--no-ceiling", "--out", str(folder)]
    assert main(argv, out=io.StringIO()) == 0
    return folder


@pytest.mark.parametrize(
    "extra",
    [
        ["--agent", "nope"],
        ["--overwrite", "--agent", "nope"],
        ["--overwrite", "--tasks", "Nope"],
        ["--overwrite", "--space", "@TMP/space_bad.yaml"],
        ["--seeds", "3"],  # another sweep's folder
        ["--overwrite", "--seeds", "-1"],
    ],
    ids=[
        "bad-agent",
        "overwrite-bad-agent",
        "overwrite-bad-task",
        "overwrite-bad-space",
        "other-sweep",
        "overwrite-bad-seeds",
    ],
)
def test_a_failed_sweep_leaves_the_folder_as_it_was(
    extra: list[str], sweep_dir: Path, files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(sweep_dir)
    argv = [*SWEEP, "--subset", "balanced:4", "--no-ceiling", "--out", str(sweep_dir), *_argv(extra, files)]
    code, _, err = _run(argv, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("harness-gym: error: ")
    assert _snapshot(sweep_dir) == before


def test_a_failed_eval_leaves_the_rows_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("earlier rows\n")
    for extra in (["--agent", "genius"], ["--env", "harness_gym/Nope-v0"], ["--agent", "llm?temprature=1"]):
        code, _, err = _run([*EVAL, "--out", str(rows), *extra], capsys)
        assert code == 2 and len(err.splitlines()) == 1
    assert rows.read_text() == "earlier rows\n"


def test_nothing_below_the_cli_imports_it() -> None:
    """``analysis``, ``baselines``, ``core``, ``llm`` ... never import ``harness_gym.cli`` at module
    level (the two deprecated aliases import it inside functions only)."""
    root = Path(__file__).resolve().parents[1] / "harness_gym"
    offenders = []
    for path in root.rglob("*.py"):
        if root / "cli" in path.parents:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "harness_gym.cli" or n.startswith("harness_gym.cli.") for n in names):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []
