"""Sweep reports: statistics on known data, every plot a valid PNG, the HTML shown in Chromium."""

from __future__ import annotations

import io
import itertools
import shutil
import struct
from pathlib import Path

import pandas as pd  # noqa: F401 - the report needs the analysis extra
import pytest

from harness_gym import cli as cli_sweep  # the sweep and report verbs
from harness_gym.analysis.extremes import worst_harness
from harness_gym.analysis.report import build_report
from harness_gym.analysis.report_plots import PLOTS
from harness_gym.analysis.report_stats import (
    COMPONENTS,
    HARNESS_PARTS,
    marginal_effects,
    variance_decomposition,
)
from harness_gym.analysis.sweep import SweepError, SweepSpec, run_sweep

CRASHING_AGENT = """
from harness_gym.baselines.agents import RandomAgent


class Crash(RandomAgent):
    def reset(self, seed=None):
        if seed == 2:
            raise RuntimeError("no episode for seed 2")
        super().reset(seed)


def make(env):
    return Crash()
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A tiny sweep (one agent crashing on one seed) and its report."""
    root = tmp_path_factory.mktemp("report")
    agent = root / "crash_agent.py"
    agent.write_text(CRASHING_AGENT)
    spec = SweepSpec.build(
        ["random", "oracle@Json", f"{agent}:make"],
        tasks=["ClickButton", "EnterText"],
        subset="balanced:4",
        seeds=3,
    )
    run_sweep(spec, root / "sweep", workers=0, progress=False)
    return build_report(root / "sweep")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_every_plot_is_a_valid_non_empty_png(report) -> None:  # noqa: ANN001
    from PIL import Image

    assert set(report.plots) == set(PLOTS)
    for name in PLOTS:
        path = report.out_dir / name
        assert path.is_file() and path.stat().st_size > 2_000, name
        width, height = png_size(path)
        assert width > 100 and height > 100, name
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            assert image.convert("L").getextrema()[0] < 200, f"{name} looks blank"


def test_markdown_and_html_show_every_plot_and_table(report) -> None:  # noqa: ANN001
    markdown = report.markdown.read_text()
    html = report.html.read_text()
    for name in PLOTS:
        assert f"]({name})" in markdown
    assert html.count('src="data:image/png;base64,') == len(PLOTS)
    for heading in (
        "Overall",
        "Marginal effect",
        "variance",
        "Ceiling vs deployed",
        "Worst harness",
        "Crashed",
    ):
        assert heading in markdown and heading in html
    assert "no episode for seed 2" in markdown
    for name in ("mismatch.csv", "marginal_effects.csv", "variance.csv", "worst_harness.csv"):
        assert (report.out_dir / name).stat().st_size > 0
    table = pd.read_csv(report.out_dir / "mismatch.csv")
    crashed = table[table["agent"].str.endswith(":make")]
    assert (crashed["errors"] == 1).all() and (crashed["n"] == 2).all()


def test_html_report_shows_every_plot_in_chromium(report, tmp_path: Path) -> None:  # noqa: ANN001
    from playwright import sync_api

    from harness_gym.envs.browser.launch import LAUNCH_ARGS, find_chromium

    moved = tmp_path / "moved.html"  # self-contained: it works away from its PNG files
    shutil.copy(report.html, moved)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=list(LAUNCH_ARGS))
        try:
            page = browser.new_page()
            page.goto(moved.as_uri(), wait_until="load")
            images = page.eval_on_selector_all(
                "img", "els => els.map(e => [e.alt, e.complete, e.naturalWidth, e.naturalHeight])"
            )
            tables = page.eval_on_selector_all("table", "els => els.length")
        finally:
            browser.close()
    assert len(images) == len(PLOTS)
    for alt, complete, width, height in images:
        assert complete and width > 0 and height > 0, f"broken image: {alt}"
    assert tables >= 5


def test_cli_report(report, tmp_path: Path) -> None:  # noqa: ANN001
    out = io.StringIO()
    sweep_dir = report.out_dir.parent
    assert (
        cli_sweep.main(["report", str(sweep_dir), "--out", str(tmp_path / "r"), "--title", "T"], out=out) == 0
    )
    assert "wrote" in out.getvalue() and (tmp_path / "r" / "report.html").exists()
    assert (tmp_path / "r" / "report.md").read_text().startswith("# T\n")
    with pytest.raises(SystemExit, match="^harness-gym: error: .* is not a sweep folder"):
        cli_sweep.main(["report", str(tmp_path / "nothing")])
    with pytest.raises(SweepError):
        build_report(tmp_path / "nothing")


def test_report_without_ceilings(tmp_path: Path) -> None:
    spec = SweepSpec.build("oracle", tasks=["ClickButton"], subset="balanced:2", seeds=2, ceiling=False)
    run_sweep(spec, tmp_path, workers=0, progress=False)
    built = build_report(tmp_path)
    assert "Ceilings were not computed" in built.markdown.read_text()
    for name in PLOTS:
        png_size(built.out_dir / name)


# -- statistics on data with a known answer ----------------------------------------------------


def synthetic(success) -> pd.DataFrame:  # noqa: ANN001
    """A complete task x harness x seed grid; ``success(task, harness, seed)`` gives each cell."""
    rows = []
    for t, h, s in itertools.product(range(4), range(4), range(4)):
        ok = bool(success(t, h, s))
        rows.append(
            {
                "agent": "a",
                "task_id": f"T{t}",
                "harness_name": f"h{h}",
                "harness_id": f"id{h}",
                "seed": s,
                "success": ok,
                "episode_return": float(ok),
                "error": None,
                "level_style": "x" if h < 2 else "y",
            }
        )
    return pd.DataFrame(rows)


HARNESS = "harness: other"  # the synthetic rows name no model, so the harness part is unsplit


@pytest.mark.parametrize(
    ("success", "component"),
    [
        (lambda t, h, s: h % 2, HARNESS),
        (lambda t, h, s: t == 0, "task"),
        (lambda t, h, s: (t + h) % 2, "task x harness"),
        (lambda t, h, s: (t + s) % 2, "seed (within task)"),
    ],
)
def test_variance_decomposition_finds_the_source(success, component: str) -> None:  # noqa: ANN001
    table = variance_decomposition(synthetic(success)).set_index("component")
    assert list(table.index) == list(COMPONENTS)
    assert table.loc[component, "share"] == pytest.approx(1.0)
    assert table["share"].sum() == pytest.approx(1.0)


def test_variance_decomposition_adds_up() -> None:
    rows = synthetic(lambda t, h, s: (t * 7 + h * 3 + s * 5 + t * h * s) % 4 == 0)
    table = variance_decomposition(rows)
    total = ((rows["success"] - rows["success"].mean()) ** 2).sum()
    assert table["sum_sq"].sum() == pytest.approx(total)
    assert (table["share"] > 0).sum() >= 3


def test_variance_decomposition_splits_the_harness_part_by_the_model() -> None:
    from harness_gym.analysis.effects import factor_effects

    # h0, h1 take style x; h2, h3 style y. Success by style alone: all main effect.
    # Success h % 2: nothing to do with style: all "other".
    for success, part in (
        (lambda t, h, s: h >= 2, HARNESS_PARTS[0]),
        (lambda t, h, s: h % 2, HARNESS_PARTS[2]),
    ):
        rows = synthetic(success)
        model = factor_effects(rows, ["style"], replicates=1).models
        table = variance_decomposition(rows, model=model).set_index("component")
        assert table.loc[part, "share"] == pytest.approx(1.0)
        assert table.loc[list(HARNESS_PARTS), "share"].sum() == pytest.approx(1.0)


def test_marginal_effects_and_worst_harness() -> None:
    rows = synthetic(lambda t, h, s: h >= 2 or (h == 1 and s < 2))  # style y always succeeds
    effects = marginal_effects(rows, ["style"]).set_index("level")
    # Harness means: h0 0, h1 0.5 (style x), h2, h3 1 (style y): x averages 0.25, y 1.
    assert effects.loc["y", "effect"] == pytest.approx(0.375)
    assert effects.loc["x", "effect"] == pytest.approx(-0.375)
    assert set(effects["estimator"]) == {"least squares"}
    for level in "xy":
        assert (
            effects.loc[level, "effect_low"]
            <= effects.loc[level, "effect"]
            <= effects.loc[level, "effect_high"]
        )
    worst = worst_harness(rows)
    assert list(worst["worst_harness"]) == ["h0"] * 4
    assert list(worst["best_success"]) == [1.0] * 4 and list(worst["worst_success"]) == [0.0] * 4


def test_long_level_names_and_withheld_effects_still_draw_legible_plots(tmp_path: Path) -> None:
    """A tool-renaming level names ~100 characters: drawn whole under a rotated axis it left no
    room for the axes (matplotlib gave up the layout, warning). Long names are shortened, the
    figure reserves their height, and a plot whose every effect is withheld says so."""
    import warnings

    from harness_gym.analysis.report_plots import (
        LABEL_CHARS,
        _level_label,
        plot_heatmap,
        plot_marginal_effects,
    )

    long = "+".join(f"('{a}', '{a.upper()}_ELEMENT_AND_DO_IT')" for a in ("click", "press", "type"))
    rows = pd.DataFrame(
        [
            {"agent": "a", "task_id": f"T{t}", "success": float((t + k) % 2), "episode_return": 0.0,
             "error": None, "level_rename_tools": lv, "level_obs_format": "json"}
            for t in range(2) for k, lv in enumerate(["none", long])
        ]
    )  # fmt: skip
    effects = pd.DataFrame(
        [
            {"agent": "a", "factor": "rename_tools", "level": lv, "effect": None, "effect_low": None,
             "effect_high": None, "estimator": "least squares"}
            for lv in ("none", long)
        ]
    )  # fmt: skip
    factors = ["rename_tools", "obs_format"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the collapsed layout was a UserWarning
        heat = plot_heatmap(rows, factors, ["a"], tmp_path / "heat.png")
        marginal = plot_marginal_effects(effects, factors, ["a"], tmp_path / "effects.png")
    assert png_size(heat)[1] > 250 and png_size(marginal)[1] > 250
    label = _level_label("rename_tools", long)
    assert len(label) <= LABEL_CHARS and label.startswith("rename_tools=(") and label.endswith("DO_IT')")
    assert _level_label("obs_format", "json") == "obs_format=json"


def test_a_design_that_withholds_every_effect_is_not_called_null() -> None:
    """ "No factor effect is significant" claims a test ran; when the design withholds every
    effect (presets: aliased throughout) the summary says none can be estimated."""
    from types import SimpleNamespace

    from harness_gym.analysis.report_summary import _summary_effects

    withheld = pd.DataFrame(
        [
            {"agent": "a", "factor": f, "level": "x", "n": 40, "effect": float("nan"),
             "effect_low": float("nan"), "effect_high": float("nan"), "p_holm": float("nan"),
             "significant": False, "aliased_with": "", "estimator": "least squares"}
            for f in ("obs_format", "tool_style")
        ]
    )  # fmt: skip
    text = _summary_effects(SimpleNamespace(table=withheld, unmet=False), "a")
    assert text.startswith("No factor effect can be estimated from this design.")
    assert "Withheld (see Marginal effects): obs_format, tool_style." in text
