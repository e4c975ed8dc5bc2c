"""experiments/ceiling_gains.py: its options refuse bad values in one line, and its retraining
recipes do what they say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from script_loader import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "ceiling_gains.py"


@pytest.mark.parametrize("flag", ["--retrain-steps", "--seeds", "--candidates", "--workers"])
@pytest.mark.parametrize("value", ["0", "-3", "x"])
def test_a_count_below_one_is_refused_in_one_line(flag: str, value: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), flag, value], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert f"argument {flag}: needs a whole number of at least 1, got '{value}'" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_retraining_recipe_is_refused_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--retrain-from", "nowhere"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "argument --retrain-from: invalid choice: 'nowhere'" in done.stderr
    assert "Traceback" not in done.stderr


def test_shrink_and_perturb_mixes_every_weight_with_a_fresh_initialization() -> None:
    """theta <- 0.4 theta + 0.1 theta_fresh on every policy parameter (value head and shared
    layers too), theta_fresh being what the policy's own initializer draws from the same seed."""
    import torch

    from harness_gym.baselines import sb3

    torch.set_num_threads(1)
    model = sb3.train("maskable_ppo", "harness_gym/ChooseList-v0", steps=1, seed=3).model
    before = [p.detach().clone() for p in model.policy.parameters()]
    torch.manual_seed(11)
    load_script("experiments/ceiling_gains.py").shrink_and_perturb(model)
    torch.manual_seed(11)
    fresh = type(model.policy)(
        model.observation_space, model.action_space, model.lr_schedule, **model.policy_kwargs
    )
    after = list(model.policy.parameters())
    assert len(after) == len(before) == len(list(fresh.parameters())) > 4
    for old, new, init in zip(before, after, fresh.parameters(), strict=True):
        assert torch.allclose(new, 0.4 * old + 0.1 * init, atol=1e-7)
        assert not torch.allclose(new, old)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", "cannot read"),
        ('{"settings": {}}', "is not a saved run (no specs, seeds, log, ceilings, before, after)"),
        ("[1, 2]", "is not a saved run"),
    ],
)
def test_from_results_refuses_a_file_that_is_not_a_saved_run(tmp_path: Path, content: str, said: str) -> None:
    bad = tmp_path / "run.json"
    bad.write_text(content)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--from-results", str(bad), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_from_results_refuses_training_options(tmp_path: Path) -> None:
    """Re-rendering trains nothing, so a training option beside it would be silently ignored."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--from-results", str(tmp_path / "x.json"), "--seeds", "3", "--quick"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--from-results re-renders a finished run; drop --quick, --seeds" in done.stderr
