"""experiments/lm_field_order.py --trained: the rows it evaluates and the curves it reads (no model)."""

from __future__ import annotations

import json
from pathlib import Path

from script_loader import load_script

from harness_gym import Harness


def _script():  # noqa: ANN202
    return load_script("experiments/lm_field_order.py")


def test_rows_reverse_each_order_alone_then_both() -> None:
    trained = Harness(element_order="reversed")
    rows = _script().reversal_rows(trained)
    first = list(rows.values())[:4]
    assert first[0] == trained
    assert first[1] == Harness()  # element order back to canonical, fields untouched
    assert first[2] == Harness(element_order="reversed", field_order="reversed")
    assert first[3] == Harness(field_order="reversed")
    assert all(h.element_order == "reversed" for h in list(rows.values())[4:])
    assert len({h.id for h in rows.values()}) == len(rows)


def test_curves_are_read_from_a_record_or_from_a_stopped_runs_log(tmp_path: Path) -> None:
    script = _script()
    folder = tmp_path / "run"
    folder.mkdir()
    history = [
        {"step": 1, "loss": 0.5},
        {"step": 0, "held_out": 3, "episodes": 30},
        {"step": 10, "held_out": 27, "episodes": 30},
    ]
    (folder / "harness_gym_training.json").write_text(json.dumps({"history": history}))
    assert script.read_curve(str(folder)) == [(0, 3, 30), (10, 27, 30)]
    log = tmp_path / "run.log"
    log.write_text(
        "noise\nstep 0: held-out greedy success 16.7% [7, 34] (46 s)\r{'loss': 1}"
        "step 10: held-out greedy success 100.0% [89, 100]\n"
    )
    assert script.read_curve(str(log)) == [(0, 5, 30), (10, 30, 30)]
