"""A script that runs a sweep with worker processes: without ``if __name__ == "__main__":`` it
is refused up front with the line it starts at (workers would import it and start the sweep
again); with the guard it runs, and every row is a real result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SWEEP = (
    'sweep(["random"], "out", tasks=["ClickButton"], space="default", subset="balanced:2", seeds=2, '
    "workers=2, progress=False)"
)


def run_script(folder: Path, text: str) -> subprocess.CompletedProcess[str]:
    script = folder / "my sweep.py"  # a path with a space
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, str(script)], cwd=folder, capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (f"{SWEEP}\n", 3),  # at the top level
        (f"def main():\n    {SWEEP}\n\n\nmain()\n", 7),  # through a function called at the top level
        (f"if True:\n    {SWEEP}\n", 4),  # under some other condition
    ],
)
def test_a_sweep_started_at_a_scripts_top_level_is_refused_with_its_line(
    tmp_path: Path, body: str, line: int
) -> None:
    text = "from harness_gym.analysis.sweep import sweep\n\n" + body
    done = run_script(tmp_path, text)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("harness_gym.analysis.sweep.spec.SweepError: "), done.stderr
    assert f"my sweep.py, line {line} starts a sweep" in last
    assert 'if __name__ == "__main__":' in last and "workers=0" in last
    assert "WorkerDied" not in done.stderr and "bootstrapping phase" not in done.stderr
    assert not (tmp_path / "out" / "episodes.jsonl").exists()


def test_the_same_sweep_under_the_main_guard_runs(tmp_path: Path) -> None:
    text = f'from harness_gym.analysis.sweep import sweep\n\nif __name__ == "__main__":\n    {SWEEP}\n'
    done = run_script(tmp_path, text)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) >= 4 and all(row["error"] is None for row in rows)
