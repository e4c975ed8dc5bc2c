"""The sweep report as a reader sees it: a real sweep of the demo's design (flips of two base
points), its report.html opened in Chromium at 1280 px through Playwright: the Summary first,
method prose and diagnostics folded (closed, opening on a click), no heading or table header
clipped, a screenshot that is a real image; and the Design section's D-efficiency says what is
true of two base points (not defined), not "0.0%"."""

from __future__ import annotations

import io
import re
from html import unescape
from pathlib import Path

import pytest

from harness_gym.analysis.report import Report, build_report
from harness_gym.analysis.sweep import SweepSpec, run_sweep

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1280

#: For every heading, summary and table header: its box, its own overflow, and the scrollable
#: box it sits in (a table wider than the page scrolls inside its .hg-table box).
MEASURE = """els => els.filter(e => e.checkVisibility()).map(e => {
  const r = e.getBoundingClientRect();
  const box = e.closest('.hg-table, table.hg-links');
  const b = box ? box.getBoundingClientRect() : null;
  return {tag: e.tagName, text: e.textContent.trim().slice(0, 60), left: r.left, right: r.right,
          scroll: e.scrollWidth, client: e.clientWidth,
          box: box ? {left: b.left, right: b.right, scroll: box.scrollWidth, client: box.clientWidth,
                      overflow: getComputedStyle(box).overflowX} : null};
})"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """random and oracle on ClickButton, the demo space's balanced:2+flips (34 harnesses), 2 seeds."""
    out = tmp_path_factory.mktemp("browser-report") / "run"
    spec = SweepSpec.build(
        ["random", "oracle"], ["ClickButton"], str(ROOT / "examples/demo-space.yaml"), "balanced:2+flips", 2
    )
    run_sweep(spec, out, workers=0, progress=False, log=io.StringIO())
    return build_report(out)


def _unclipped(measured: list[dict], where: str) -> None:
    assert measured, f"nothing measured {where}"
    for m in measured:
        label = f"{m['tag']} {m['text']!r} {where}"
        if m["client"] > 0:  # a block box: its text fits in it
            assert m["scroll"] <= m["client"] + 1, f"clipped {label}: {m}"
        box = m["box"]
        if box is not None and box["scroll"] > box["client"] + 1:  # inside a scrolling table box
            assert box["overflow"] in ("auto", "scroll"), f"wide table not scrollable: {label}"
            assert box["left"] >= -1 and box["right"] <= WIDTH + 1, f"table box off the page: {label}"
        else:
            assert m["left"] >= -1 and m["right"] <= WIDTH + 1, f"off the page: {label}: {m}"


def test_report_at_1280px_in_chromium(report: Report, tmp_path: Path) -> None:
    from PIL import Image
    from playwright import sync_api

    from harness_gym.envs.browser.launch import LAUNCH_ARGS, find_chromium

    shot = tmp_path / "report.png"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=list(LAUNCH_ARGS))
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto(report.html.as_uri(), wait_until="load")
            sections = page.eval_on_selector_all(
                "body > h2, body > details > summary > h2", "els => els.map(e => e.textContent)"
            )
            folds = page.locator("details.hg-fold")
            n_folds = folds.count()
            closed = page.eval_on_selector_all("details", "els => els.map(e => e.open)")
            hidden = page.eval_on_selector_all(
                "details.hg-fold > :not(summary)", "els => els.filter(e => e.checkVisibility()).length"
            )
            selector = "h1, h2, h3, h4, summary, th"
            closed_sizes = page.eval_on_selector_all(selector, MEASURE)
            page_width = page.evaluate("document.documentElement.scrollWidth")
            design = page.locator("details.hg-fold", has=page.locator("summary > h2", has_text="Design"))
            design_text = design.locator("p").first
            before = design_text.is_visible()
            design.locator("summary").click()
            after_click = design.evaluate("e => e.open"), design_text.is_visible()
            for i in range(n_folds):  # open every fold: what it holds fits the page too
                if not folds.nth(i).evaluate("e => e.open"):
                    folds.nth(i).locator("summary").first.click()
            open_sizes = page.eval_on_selector_all(selector, MEASURE)
            opened = page.eval_on_selector_all("details", "els => els.every(e => e.open)")
            open_width = page.evaluate("document.documentElement.scrollWidth")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()

    assert sections[0] == "Summary" and sections[1] == "Overall", sections
    assert "Design" in sections
    assert n_folds >= 6 and closed and not any(closed), closed  # every fold starts closed
    assert hidden == 0  # nothing inside a closed fold is rendered
    assert not before and after_click == (True, True)  # a click opens one
    assert opened
    assert page_width <= WIDTH and open_width <= WIDTH  # no sideways scrolling of the page
    _unclipped(closed_sizes, "with the folds closed")
    _unclipped(open_sizes, "with every fold open")
    assert any(m["tag"] == "TH" for m in open_sizes)
    assert shot.stat().st_size > 10_000
    with Image.open(shot) as image:
        image.verify()
    with Image.open(shot) as image:
        assert image.format == "PNG" and image.width == WIDTH and image.height > 900
        low, high = image.convert("L").getextrema()
        assert low < 100 and high > 200  # text on a background, not a blank page


def test_folds_hold_the_method_and_every_number_stays(report: Report) -> None:
    """The HTML folds what the Markdown prints as ordinary sections: the same text and numbers."""
    html = report.html.read_text()
    markdown = report.markdown.read_text()
    assert "<details" not in markdown  # Markdown: plain sections, readable anywhere
    folded = re.findall(r'<details class="hg-fold"><summary><h(\d)>([^<]+)</h\1></summary>', html)
    titles = [unescape(t) for _, t in folded]
    for title in (
        "Design",
        "How the intervals are computed",
        "How the effects are estimated, and the model's diagnostics",
        "What the components are",
        "How the intervals and the test are computed",
        "Harnesses (each one's factor levels)",
    ):
        assert title in titles, titles
        assert f"## {title}\n" in markdown or f"### {title}\n" in markdown
    assert html.count("<details") == html.count("</details>") == len(folded)
    # Every number of the Markdown report is in the HTML one (tables and prose alike).
    number = re.compile(r"(?<![\w.#-])[-+]?\d+(?:\.\d+)?%?")
    body = re.sub(r"data:image/png;base64,[^\"]+", "", html)
    text = re.sub(r"\]\([^)]*\)", "]", markdown)  # not the links' targets
    missing = set(number.findall(text)) - set(number.findall(body))
    assert not missing, missing


def test_design_section_says_d_efficiency_is_not_defined_for_two_base_points(report: Report) -> None:
    markdown = report.markdown.read_text()
    design = markdown.split("## Design\n")[1].split("\n## ")[0]
    # demo-space.yaml: 6 + 2 + 4 + 3 + 2 + 3 + 2 + 2 levels: 1 + 5+1+3+2+1+2+1+1 = 17 parameters
    assert (
        "D-efficiency of the main-effects model is not defined: 2 point(s) cannot fit its 17 parameters"
        in (design)
    )
    assert "0.0%" not in design and "D-efficiency of the main-effects model is 0" not in design
    assert "The effects come from these pairs" in design


def test_an_older_sweep_record_of_zero_d_efficiency_is_not_printed_as_a_measure() -> None:
    """sweep.json files written before ``parameters`` was recorded say 0.0 both for too few
    points and for aliased columns: the report says the model cannot be fit, not "0.0%"."""
    from harness_gym.analysis.report_design import _design_text

    old = {"n": 2, "level_imbalance": 1, "pair_deviation": 0.92, "max_correlation": 1.0}
    design = {"kind": "flips", "construction": "c", "n": 34, "mode": "all", "flips": [[0, 1, "x"]] * 32}
    said = " ".join(
        _design_text({**design, "base": {"kind": "k", "n": 2, "balance": {**old, "d_efficiency": 0.0}}}, 34)
    )
    assert (
        "is 0%: its columns are aliased in these points (or the points are fewer than its parameters)" in said
    )
    assert "0.0%" not in said
    new = {**old, "d_efficiency": None, "parameters": 17}
    said = " ".join(_design_text({**design, "base": {"kind": "k", "n": 2, "balance": new}}, 34))
    assert "is not defined: 2 point(s) cannot fit its 17 parameters" in said
    measured = {**old, "n": 40, "d_efficiency": 87.25, "parameters": 17}
    assert "D-efficiency of the main-effects model is 87.2%" in " ".join(
        _design_text({"kind": "k", "n": 40, "balance": measured}, 40)
    )
