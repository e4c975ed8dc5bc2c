"""One row schema, one row store: every column a row writer produces comes back typed."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

import numpy as np  # noqa: E402

from harness_gym.analysis.sweep import SweepSpec, load_rows, run_sweep  # noqa: E402
from harness_gym.analysis.sweep.store import ROWS_JSONL, ROWS_PARQUET, RowWriter, read_finished  # noqa: E402
from harness_gym.core.space import HarnessSpace  # noqa: E402
from harness_gym.rows import (  # noqa: E402
    Column,
    RowSchemaError,
    append_rows,
    read_jsonl,
    read_table,
    register_columns,
    rows_frame,
    sweep_columns,
    write_table,
)
from harness_gym.rows.schema import column, plain  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "sweep_v1"  # written by the code before the row store
KINDS = {"int": (int, np.integer), "float": (float, np.floating), "bool": (bool, np.bool_), "str": (str,)}


def assert_rows_come_back(rows: Sequence[Mapping[str, Any]], frame: Any) -> None:
    """Every column of every row is in the frame with its value and its type."""
    assert len(frame) == len(rows)
    for i, row in enumerate(rows):
        for name, want in row.items():
            assert name in frame.columns, f"column {name!r} was dropped"
            got = frame[name].iloc[i]
            col = column(name)
            assert col is not None, name
            if want is None:
                assert got is None or (isinstance(got, float) and math.isnan(got)), (name, got)
            elif col.is_json:
                assert isinstance(got, str) and json.loads(got) == json.loads(
                    json.dumps(want, default=plain)
                ), name
            elif col.type == "int" and isinstance(got, float):  # an int column with nulls in pandas
                assert got.is_integer() and int(got) == want, (name, got, want)
            else:
                assert isinstance(got, KINDS[col.type]), (name, type(got), col.type)
                assert got == pytest.approx(want) if col.type == "float" else got == want, (name, got, want)


def assert_every_format(rows: list[dict[str, Any]], out: Path, base: Sequence[str] = ()) -> None:
    """Rows come back from JSON Lines (via load_rows), Parquet (via load_rows) and CSV."""
    jsonl_frame = load_rows(out) if (out / ROWS_JSONL).exists() else None
    if jsonl_frame is not None and not (out / ROWS_PARQUET).exists():
        assert_rows_come_back(rows, jsonl_frame)
    for name in (ROWS_PARQUET, "episodes.csv"):
        write_table(rows, out / name, base)
        assert_rows_come_back(rows, read_table(out / name))
    assert_rows_come_back(rows, load_rows(out))  # the Parquet table, now the newest file
    (out / ROWS_PARQUET).unlink()
    (out / ROWS_JSONL).touch()
    assert_rows_come_back(rows, load_rows(out))  # the JSON Lines


def test_sweep_rows_with_language_model_columns_round_trip(tmp_path: Path) -> None:
    spec = SweepSpec.build(["random", "oracle"], tasks=["ClickButton"], subset="balanced:2", seeds=2)
    run_sweep(spec, tmp_path, workers=0, progress=False)
    rows = [read_finished(tmp_path, spec.id)[i] for i in range(spec.n_cells)]
    assert_every_format(rows, tmp_path, sweep_columns(spec.factors))
    # The columns a language-model agent fills, with values of every type.
    llm = {
        "model": "tiny",
        "backend": "embedded",
        "sampling": {"temperature": 0.7, "max_tokens": 64},
        "constrained": "regex",
        "llm_requests": 3,
        "cache_hits": 1,
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "llm_latency": 0.25,
        "llm_errors": {"timeout": 1},
        "completions": ["click(1)", {"name": "click", "arguments": {"element": 1}}],
    }
    filled = [{**r, **llm} for r in rows]
    (tmp_path / ROWS_JSONL).write_text("".join(json.dumps(r) + "\n" for r in filled))
    assert_every_format(filled, tmp_path, sweep_columns(spec.factors))


def test_search_rows_keep_their_cost_columns(tmp_path: Path) -> None:
    from harness_gym.analysis.search import search

    space = HarnessSpace({"obs_format": ["json", "markdown"], "tool_style": ["json", "xml"]})
    search(
        "oracle", tmp_path, tasks="ClickButton", space=space, budget=40, dev_seeds=2, test_seeds=2, log=None
    )
    rows = sorted(read_jsonl(tmp_path / ROWS_JSONL), key=lambda r: r["index"])
    assert rows and all(r["obs_chars"] > 0 and r["actions"] == r["steps"] for r in rows)
    frame = load_rows(tmp_path)  # the search's own Parquet table
    assert {"obs_chars", "action_chars", "actions"} <= set(frame.columns)
    assert frame["obs_chars"].dtype == np.int64
    assert_rows_come_back(rows, frame)
    assert_every_format(rows, tmp_path)


def test_multiagent_rows_load_with_load_rows(tmp_path: Path) -> None:
    pytest.importorskip("pettingzoo")
    from harness_gym.multiagent import run_multiagent_sweep
    from harness_gym.multiagent.mesh import HintMeshEnv
    from harness_gym.multiagent.scripted import HintFollower, MeshOracle

    def policy(env: HintMeshEnv, agent: str) -> Any:
        return MeshOracle(env, agent) if agent == "agent_0" else HintFollower(env, agent, seed=7)

    rows = run_multiagent_sweep(
        {"mesh": lambda: HintMeshEnv("ClickButton", 3, channel={"hint_position": "first"})},
        policy,
        [0, 1],
        out_dir=tmp_path,
    )
    assert {"env_id", "channel", "team_reward", "level_hint_position"} <= set(rows[0])
    assert_rows_come_back(rows, load_rows(tmp_path))
    assert_every_format(rows, tmp_path)


def test_a_column_missing_from_the_schema_is_an_error_at_write_time(tmp_path: Path) -> None:
    spec = SweepSpec.build("random", tasks=["ClickButton"], subset="balanced:2", seeds=1)
    run_sweep(spec, tmp_path, workers=0, progress=False)
    row = dict(read_finished(tmp_path, spec.id)[0])
    before = (tmp_path / ROWS_JSONL).read_text()
    writer = RowWriter(tmp_path / ROWS_JSONL, 1, False, "test")
    with pytest.raises(RowSchemaError, match="'my_new_column' is not in the row schema.*register_columns"):
        writer.write([{**row, "my_new_column": 1}])
    with pytest.raises(RowSchemaError, match="'steps' is int, got str"):
        writer.write([{**row, "steps": "3"}])
    with pytest.raises(RowSchemaError, match="'success' is bool, got int"):
        writer.write([{**row, "success": 1}])
    with pytest.raises(RowSchemaError, match="my_new_column"):  # the good row before it is not written
        writer.write([row, {**row, "my_new_column": 1}])
    writer.close()
    assert (tmp_path / ROWS_JSONL).read_text() == before  # nothing half-written
    with pytest.raises(RowSchemaError, match="my_new_column"):
        write_table([{**row, "my_new_column": 1}], tmp_path / "t.parquet")
    assert not (tmp_path / "t.parquet").exists()


def test_the_hook_adds_a_column_in_one_line_and_refuses_a_conflicting_type(tmp_path: Path) -> None:
    register_columns(Column("test_rows_plugin_score", "float", "a plugin's column"))
    row = {"index": 0, "sweep_id": "s", "test_rows_plugin_score": 0.5}
    write_table([row], tmp_path / "t.parquet")
    assert read_table(tmp_path / "t.parquet")["test_rows_plugin_score"].tolist() == [0.5]
    register_columns(Column("test_rows_plugin_score", "float", "again: a no-op"))
    with pytest.raises(RowSchemaError, match="already registered as 'float'"):
        register_columns(Column("test_rows_plugin_score", "str", "conflict"))
    with pytest.raises(ValueError, match="not one of"):
        Column("x", "decimal", "no such type")


def test_sweep_folders_written_before_the_row_store_still_load(tmp_path: Path) -> None:
    folder = tmp_path / "old sweep"
    shutil.copytree(FIXTURE, folder)
    old_rows = sorted(read_jsonl(folder / ROWS_JSONL), key=lambda r: r["index"])
    meta = json.loads((folder / "sweep.json").read_text())
    from_parquet = load_rows(folder)
    assert list(from_parquet.columns) == sweep_columns(meta["factors"])
    assert_rows_come_back(old_rows, from_parquet)
    (folder / ROWS_PARQUET).unlink()  # an interrupted old sweep: JSON Lines only
    from_jsonl = load_rows(folder)
    assert list(from_jsonl.columns) == list(from_parquet.columns)
    assert_rows_come_back(old_rows, from_jsonl)
    # Resuming the old sweep reruns nothing and writes the same table.
    spec = SweepSpec.build(["random", "oracle"], ["ClickButton"], "default", "sample:2", [0, 1])  # as made
    assert spec.id == meta["sweep_id"]
    result = run_sweep(spec, folder, workers=0, progress=False)
    assert result.n_run == 0 and result.n_skipped == len(old_rows)
    assert_rows_come_back(old_rows, load_rows(folder))


def test_a_column_another_version_wrote_is_kept_on_read() -> None:
    frame = rows_frame([{"index": 0, "from_the_future": 3}, {"index": 1, "from_the_future": None}])
    assert frame["from_the_future"].tolist()[0] == 3


def test_numpy_numbers_are_numbers_in_every_format(tmp_path: Path) -> None:
    row = {"index": 0, "steps": np.int64(3), "episode_return": np.float64(0.5), "success": np.bool_(True)}
    row["completions"] = [np.int64(1)]
    (tmp_path / "sweep.json").write_text(json.dumps({"sweep_id": "s", "factors": []}))
    with (tmp_path / ROWS_JSONL).open("w") as fh:
        append_rows(fh, [row])
    assert read_jsonl(tmp_path / ROWS_JSONL) == [
        {"index": 0, "steps": 3, "episode_return": 0.5, "success": True, "completions": [1]}
    ]
    assert_every_format([row], tmp_path)
