"""``harness-gym view``: the static page of a real sweep's run folder, in Chromium through
Playwright: from the report's largest effect to a pair of episodes in two clicks, filters, the
pair side by side with the first diverging step marked, and a screenshot at 1280 px."""

from __future__ import annotations

import io
import json
import re
import struct
from pathlib import Path

import pytest

from harness_gym import cli
from harness_gym.analysis.report import build_report
from harness_gym.analysis.sweep import SweepSpec, run_sweep
from harness_gym.analysis.viewer import ASSET_FILES, view_data
from harness_gym.rows.trajectories import read_trajectories

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["ClickButton", "EnterText", "ClickLink", "LoginUser", "ClickOption", "ChooseList"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """oracle@Json over a base harness and its flips: under invalid_action=end it fails where the
    harness's tool style is not JSON, so the report's largest effect is invalid_action."""
    out = tmp_path_factory.mktemp("viewed") / "run"
    spec = SweepSpec.build(
        ["oracle@Json"], TASKS, str(ROOT / "examples/demo-space.yaml"), "balanced:1+flips", 2, ceiling=False
    )
    run_sweep(spec, out, workers=0, progress=False, log=io.StringIO())
    build_report(out)
    return out


def test_view_writes_a_folder_that_needs_no_network(run_dir: Path, tmp_path: Path) -> None:
    text = io.StringIO()
    assert cli.main(["view", str(run_dir), "--out", str(tmp_path / "v")], out=text) == 0
    assert "index.html" in text.getvalue()
    for name in ASSET_FILES:
        assert (tmp_path / "v" / "assets" / name).stat().st_size > 0
    page = (tmp_path / "v" / "index.html").read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # everything ships in the folder
    index, trajectories = view_data(run_dir)
    assert len(index["rows"]) == 17 * len(TASKS) * 2  # 17 harnesses x 6 tasks x 2 seeds
    assert {r["i"] for r in index["rows"] if r["recorded"]} == set(read_trajectories(run_dir))
    data = (tmp_path / "v" / "data" / "index.js").read_text()
    assert json.loads(data[len("window.HG.index(") : -3])["sweep_id"] == index["sweep_id"]
    with pytest.raises(SystemExit, match="is not a sweep folder"):
        cli.main(["view", str(tmp_path / "nothing")])
    assert not (tmp_path / "nothing").exists()


def _png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def test_two_clicks_from_the_largest_effect_to_a_pair_in_chromium(run_dir: Path, tmp_path: Path) -> None:
    from playwright import sync_api

    from harness_gym.envs.browser.launch import LAUNCH_ARGS, find_chromium

    report = run_dir / "report" / "report.html"
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=list(LAUNCH_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route(re.compile(r"^https?://"), lambda route: route.abort())  # no network
            page.goto(report.as_uri(), wait_until="load")
            # Click 1: the largest effect's link in the report.
            link = page.locator("table.hg-links a", has_text="invalid_action=").first
            label = link.inner_text()
            link.click()
            page.wait_for_selector(".tabulator-row")
            count = page.inner_text("#hg-count")
            shown, total = map(int, re.findall(r"\d+", count)[:2])
            assert 0 < shown < total == 17 * len(TASKS) * 2
            factor, level = label.split("=")
            assert page.eval_on_selector("#hg-differs", "e => e.value") == factor
            levels = page.eval_on_selector_all(
                f'.tabulator-row .tabulator-cell[tabulator-field="L_{factor}"]',
                "els => els.map(e => e.textContent)",
            )
            assert levels and set(levels) == {level}
            # Click 2: an episode opens beside its partner one factor away.
            page.locator(".tabulator-row").first.click()
            page.wait_for_selector("#hg-pair:not([hidden]) .hg-step")
            banner = page.inner_text("#hg-diverge")
            t = int(re.search(r"first diverging step: t = (\d+)", banner).group(1))
            marked = page.eval_on_selector_all(".hg-step.hg-diverge", "els => els.map(e => e.id)")
            assert marked == [f"step-{t}"]
            changed = page.eval_on_selector_all(
                ".hg-lv.hg-changed", "els => els.map(e => e.textContent.trim())"
            )
            assert changed and all(c.startswith(f"{factor}=") for c in changed)
            assert page.locator("#hg-left-head").inner_text() != page.locator("#hg-right-head").inner_text()
            shot = tmp_path / "pair.png"
            page.screenshot(path=str(shot))
            assert _png_size(shot) == (1280, 900)
            # Any other harness of the same task and seed can be picked.
            options = page.eval_on_selector_all("#hg-vs option", "els => els.map(e => e.value)")
            assert len(options) == 16
            page.select_option("#hg-vs", options[-1])
            page.wait_for_function(f"location.hash.includes('vs={options[-1]}')")
            page.wait_for_selector(".hg-step")
            # Back to the list, then clear the filters: every episode again.
            page.click("#hg-back")
            page.wait_for_selector("#hg-list:not([hidden])")
            page.click("#hg-clear")
            page.wait_for_function(
                f"document.querySelector('#hg-count').textContent.startsWith('{total} of')"
            )
        finally:
            browser.close()
    assert errors == []
