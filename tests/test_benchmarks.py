"""The benchmarks the docs quote keep working: they read what they time from the project itself
(the Makefile's demo commands, the registry's tasks), so a change there must not silently
leave them timing nothing. No timing is asserted here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from script_loader import load_script

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):  # noqa: ANN202 - a benchmark script as a module
    return load_script(f"benchmarks/{name}.py")


def test_demo_time_finds_every_job_of_make_demo_and_moves_its_folders(tmp_path: Path) -> None:
    demo_time = _load("demo_time")
    jobs = demo_time.demo_jobs()
    recipe = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert len(jobs) == recipe.count("harness-gym ") >= 2
    assert [j[1] for j in jobs].count("sweep") >= 1 and all(Path(j[0]).name == "harness-gym" for j in jobs)
    outs = [a for j in jobs for a in demo_time.moved(j, tmp_path) if "runs" in a or str(tmp_path) in a]
    assert outs and all(a.startswith(str(tmp_path)) for a in outs)  # nothing written under runs/


def test_step_throughput_draws_prints_a_row_per_task() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "step_throughput.py"), "--draws", "--tasks", "EnterText",
         "ClickTab", "--rounds", "1", "--steps", "200"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[1:] if line.strip()}
    assert set(rows) == {"EnterText", "ClickTab"}
    for episode, reset, drawn, per_step in rows.values():
        assert float(episode) >= 1
        assert all(x.endswith("x") and float(x[:-1]) > 0 for x in (reset, drawn, per_step))
