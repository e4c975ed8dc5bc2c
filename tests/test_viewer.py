"""``harness-gym view``: the static page of a real sweep's run folder, in Chromium through
Playwright: from the report's largest effect to a pair of episodes in two clicks, filters, the
pair side by side with the first diverging step marked, and a screenshot at 1280 px."""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
from pathlib import Path
from typing import Any

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


# -- an untrusted run folder -------------------------------------------------------------------

#: Set before any page script runs: a payload that executes calls it.
RECORDER = "window.__pwned = []; window.__pw = function (n) { window.__pwned.push(String(n)); };"


def _payload(field: str) -> str:
    """Markup that records ``field`` if it is ever parsed as HTML, and shows as text if not."""
    return f"{field}<img src=x onerror=__pw('{field}')><svg onload=__pw('{field}')>'\"><b>"


P = _payload
#: The run folder's own name is shown in the page's title and heading.
RUN_NAME = "run<img src=x onerror=__pw('run_name')>"


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder an attacker wrote: a payload in every string the viewer shows."""
    from harness_gym.rows.trajectories import TrajectoryWriter

    run = tmp_path_factory.mktemp("crafted") / RUN_NAME
    run.mkdir()
    factor = P("factor")
    meta = {"kind": "sweep", "sweep_id": P("sweep_id"), "factors": [factor], "agents": [P("agent")]}
    (run / "sweep.json").write_text(json.dumps(meta))
    harnesses = [(P("harness_a"), P("level_a")), (P("harness_b"), P("level_b"))]
    rows = []
    for task in (P("task_a"), P("task_b")):
        for (name, level), success in zip(harnesses, (True, False)):
            rows.append(
                {
                    "index": len(rows),
                    "agent": P("agent"),
                    "task_id": task,
                    "harness_name": name,
                    "harness_id": name,
                    "seed": 0,
                    "success": success,
                    "error": P("row_error") if len(rows) == 3 else None,
                    "episode_return": 1.0 if success else 0.0,
                    "steps": 2,
                    "invalid_actions": 0,
                    "parse_failures": 1,
                    f"level_{factor}": level,
                }
            )
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    writer = TrajectoryWriter(run)
    for row in rows:
        side = "a" if row["index"] % 2 == 0 else "b"
        step = {
            "t": 1,
            "observation": P(f"observation_{side}"),
            "reply": P("reply"),
            "parsed": P("parsed"),
            "parse_status": "ok",
            "error": P("refusal"),
            "reward": 0.0,
            "state_digest": P("digest"),
            "messages": [{"role": P("role"), "content": P("message")}],
            "screenshot_png": _png(),
        }
        bad = {"t": 2, "observation": P("observation_2"), "reply": P("reply_2"), "parsed": None}
        bad.update({"parse_status": P("parse_status"), "error": P("step_error"), "reward": 0.0})
        writer.write(row, {"system_prompt": P(f"system_prompt_{side}"), "steps": [step, bad]})
    writer.close()
    return run


#: Every payload the page must show as text, by where it shows.
LIST_TEXT = [
    "sweep_id",
    "factor",
    "agent",
    "task_a",
    "task_b",
    "harness_a",
    "harness_b",
    "level_a",
    "level_b",
]
PAIR_TEXT = [
    *("observation_a", "observation_b", "observation_2", "reply", "reply_2", "parsed", "refusal"),
    *("digest", "role", "message", "parse_status", "step_error", "system_prompt_a", "system_prompt_b"),
    *("harness_a", "harness_b", "level_a", "level_b", "agent"),
]


def _chromium(p: Any) -> Any:
    from harness_gym.envs.browser.launch import LAUNCH_ARGS, find_chromium

    return p.chromium.launch(executable_path=find_chromium(), args=list(LAUNCH_ARGS))


def _open_every_filter_and_pair(page: Any, url: str) -> None:
    """Load the list, open each column's header filter, then each episode beside its pair;
    assert every payload is on the page as text."""
    page.goto(url, wait_until="load")
    page.wait_for_selector(".tabulator-row")
    body = page.inner_text("body")
    for field in LIST_TEXT:
        assert P(field) in body, field
    assert RUN_NAME in page.title() and RUN_NAME in page.inner_text("#hg-title")
    titles = page.eval_on_selector_all(".tabulator-col-title", "els => els.map(e => e.textContent)")
    cells = page.eval_on_selector_all(".tabulator-cell", "els => els.map(e => e.textContent)")
    assert P("factor") in titles
    for field in ("agent", "task_a", "task_b", "harness_a", "harness_b", "level_a", "level_b"):
        assert P(field) in cells, field
    fields = ["agent", "task", "harness", "seed", "outcome", f"L_{P('factor')}"]
    seen: dict[str, list[str]] = {}
    columns = page.locator(".tabulator-col")
    by_field = {
        columns.nth(k).get_attribute("tabulator-field"): columns.nth(k) for k in range(columns.count())
    }
    for field in fields:
        by_field[field].locator(".tabulator-header-filter input").click()
        page.wait_for_selector(".tabulator-edit-list .tabulator-edit-list-item")
        seen[field] = page.eval_on_selector_all(
            ".tabulator-edit-list .tabulator-edit-list-item", "els => els.map(e => e.textContent)"
        )
        page.keyboard.press("Escape")
        page.click("#hg-summary")
    assert P("agent") in seen["agent"] and {P("task_a"), P("task_b")} <= set(seen["task"])
    assert {P("harness_a"), P("harness_b")} <= set(seen["harness"])
    assert {P("level_a"), P("level_b")} <= set(seen[f"L_{P('factor')}"])
    for ep, vs in ((0, 1), (1, 0), (3, 2)):
        page.evaluate(f"location.hash = 'ep={ep}&vs={vs}'")
        page.wait_for_selector("#hg-pair:not([hidden]) #step-2")
        page.click("#hg-prompts summary")
        for det in page.locator(".hg-cell details summary").all():
            det.click()
        text = page.inner_text("#hg-pair")
        for field in [*PAIR_TEXT, "task_a" if ep < 2 else "task_b"]:
            assert P(field) in text, (ep, field)
        vs_text = page.eval_on_selector_all("#hg-vs option", "els => els.map(e => e.textContent)")
        assert any(P("harness_a") in t or P("harness_b") in t for t in vs_text)
        page.click("#hg-prompts summary")
    page.click("#hg-back")
    page.wait_for_selector("#hg-list:not([hidden])")


def test_a_crafted_run_folder_shows_its_strings_as_text_and_runs_nothing(crafted: Path) -> None:
    from playwright import sync_api

    page_path = cli_view(crafted)
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = _chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.add_init_script(RECORDER)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.route(re.compile(r"^https?://"), lambda route: route.abort())
            _open_every_filter_and_pair(page, page_path.as_uri())
            shots = page.eval_on_selector_all(".hg-cell img", "els => els.map(e => e.naturalWidth)")
            assert page.evaluate("window.__pwned") == []
            # The recorder itself works: a payload parsed as HTML would have been caught.
            page.evaluate(f"document.body.insertAdjacentHTML('beforeend', {json.dumps(P('probe'))})")
            page.wait_for_function("window.__pwned.length > 0")
        finally:
            browser.close()
    assert shots and all(w == 8 for w in shots)  # the run's own screenshots do load
    assert errors == []


def cli_view(run: Path, *extra: str) -> Path:
    text = io.StringIO()
    assert cli.main(["view", str(run), *extra], out=text) == 0
    return Path(text.getvalue().split("wrote ", 1)[1].split(" (open it", 1)[0])


# -- --out never deletes what the viewer did not write -------------------------------------------


def _refused(argv: list[str]) -> str:
    """The one line a refused command printed (exit code 2)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    line = str(exit_info.value)
    assert line.startswith("harness-gym: error: ") and "\n" not in line
    return line


def test_out_refuses_a_folder_of_user_files_and_keeps_them(crafted: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    (mine / "data" / "my_dataset").mkdir(parents=True)
    (mine / "data" / "my_dataset" / "train.csv").write_text("a,b\n1,2\n")
    (mine / "index.html").write_text("<p>my page</p>")
    line = _refused(["view", str(crafted), "--out", str(mine)])
    assert line.startswith("harness-gym: error: ") and "did not write" in line and str(mine) in line
    assert (mine / "data" / "my_dataset" / "train.csv").read_text() == "a,b\n1,2\n"
    assert (mine / "index.html").read_text() == "<p>my page</p>"
    assert sorted(p.name for p in mine.rglob("*")) == ["data", "index.html", "my_dataset", "train.csv"]


def test_out_into_its_own_folder_again_replaces_only_its_files(crafted: Path, tmp_path: Path) -> None:
    out = tmp_path / "v"
    cli_view(crafted, "--out", str(out))
    (out / "notes.txt").write_text("mine")  # a user's file in the viewer's folder stays
    (out / "data" / "t_0007.js").write_text("stale chunk the viewer wrote once")
    first = (out / "data" / "index.js").read_text()
    cli_view(crafted, "--out", str(out))
    assert (out / "notes.txt").read_text() == "mine" and (out / "data" / "index.js").read_text() == first
    assert not (out / "data" / "t_0007.js").exists()  # its own stale chunk is gone
    assert sorted(p.name for p in (out / "data").iterdir()) == ["index.js", "t_0000.js"]
    # An empty folder is the viewer's to take; a symlink where its data goes is refused.
    empty = tmp_path / "empty"
    empty.mkdir()
    cli_view(crafted, "--out", str(empty))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "keep").mkdir(parents=True)
    (elsewhere / "index.js").write_text("someone's file")
    linked = tmp_path / "linked"
    cli_view(crafted, "--out", str(linked))
    shutil.rmtree(linked / "data")
    (linked / "data").symlink_to(elsewhere)
    assert "is a symbolic link" in _refused(["view", str(crafted), "--out", str(linked)])
    assert (elsewhere / "index.js").read_text() == "someone's file"


def test_a_viewer_folder_from_before_the_marker_is_still_the_viewers(crafted: Path, tmp_path: Path) -> None:
    out = tmp_path / "old"
    cli_view(crafted, "--out", str(out))
    (out / ".harness-gym-view").unlink()
    cli_view(crafted, "--out", str(out))
    assert (out / ".harness-gym-view").is_file()


def test_report_keeps_a_view_folder_of_user_files(run_dir: Path) -> None:
    view = run_dir / "view"
    saved = run_dir.parent / "saved-view"
    view.rename(saved)
    try:
        (view / "data").mkdir(parents=True)
        (view / "data" / "train.csv").write_text("x\n")
        text = io.StringIO()
        assert cli.main(["report", str(run_dir)], out=text) == 0
        assert "note: the report links to no episodes" in text.getvalue()
        assert (view / "data" / "train.csv").read_text() == "x\n"
        assert sorted(p.name for p in view.rglob("*")) == ["data", "train.csv"]
        report = (run_dir / "report" / "report.html").read_text()
        assert "No viewer:" in report and "view/index.html#" not in report
    finally:
        shutil.rmtree(view)
        saved.rename(view)
        build_report(run_dir)


# -- --serve serves the view and the run files it reads, nothing else ------------------------------


def _get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", host or f"127.0.0.1:{port}")
        conn.endheaders()
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def test_serve_answers_only_the_views_files(crafted: Path, tmp_path: Path) -> None:
    import threading

    from harness_gym.analysis.viewer_server import make_server

    (crafted / "etc_link").symlink_to("/etc", target_is_directory=True)
    (crafted / "screenshots" / "0" / "9.png").symlink_to("/etc/passwd")
    (tmp_path / "private.txt").write_text("secret")
    out = tmp_path / "page"  # --out outside the run folder: its neighbours are not served
    cli_view(crafted, "--out", str(out))
    (out / "extra.html").write_text("not written by the viewer")
    server = make_server(out, crafted, 0)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        status, page = _get(port, "/index.html")
        assert status == 200 and b"assets/viewer.js" in page
        assert _get(port, "/")[1] == page
        assert _get(port, "/index.html", f"localhost:{port}")[0] == 200
        assert _get(port, "/data/index.js")[0] == 200 and _get(port, "/assets/tabulator.min.js")[0] == 200
        status, png = _get(port, "/run/screenshots/0/1.png")
        assert status == 200 and png[:8] == b"\x89PNG\r\n\x1a\n"
        refused = [
            "/etc_link/passwd",
            "/run/etc_link/passwd",
            "/run/screenshots/0/9.png",  # a symlink out of the tree, under a name the page uses
            "/run/sweep.json",
            "/run/episodes.jsonl",
            "/run/",
            "/assets/",
            "/data/",
            "/extra.html",
            "/.harness-gym-view",
            "/../private.txt",
            "/%2e%2e/private.txt",
            "/private.txt",
            "/run/../../private.txt",
            "/assets/../../private.txt",
        ]
        for path in refused:
            status, body = _get(port, path)
            assert status == 404, path
            assert b"secret" not in body and b"root:" not in body and b"<a href" not in body
        for host in (f"evil.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}", "attacker.localhost"):
            status, body = _get(port, "/index.html", host)
            assert status == 403 and b"assets" not in body, host
    finally:
        server.shutdown()
        server.server_close()
        (crafted / "etc_link").unlink()
        (crafted / "screenshots" / "0" / "9.png").unlink()


def test_the_served_page_loads_and_runs_nothing(crafted: Path, tmp_path: Path) -> None:
    import threading

    from playwright import sync_api

    from harness_gym.analysis.viewer_server import make_server

    out = tmp_path / "served"
    cli_view(crafted, "--out", str(out))
    server = make_server(out, crafted, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    errors: list[str] = []
    try:
        with sync_api.sync_playwright() as p:
            browser = _chromium(p)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.add_init_script(RECORDER)
                page.on("pageerror", lambda e: errors.append(str(e)))
                _open_every_filter_and_pair(page, f"http://127.0.0.1:{server.server_address[1]}/index.html")
                page.evaluate("location.hash = 'ep=0&vs=1'")
                page.wait_for_selector("#hg-pair:not([hidden]) .hg-cell img")
                page.wait_for_function(
                    "[...document.querySelectorAll('.hg-cell img')].every(i => i.complete)"
                )
                shots = page.eval_on_selector_all(".hg-cell img", "els => els.map(e => e.naturalWidth)")
                assert page.evaluate("window.__pwned") == []
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    assert shots and all(w == 8 for w in shots)  # the screenshots come from /run/
    assert errors == []


def test_the_reports_links_show_names_as_text(crafted: Path, tmp_path: Path) -> None:
    import pandas as pd
    from playwright import sync_api

    from harness_gym.analysis.report_links import episode_links_section
    from harness_gym.analysis.report_render import _html
    from harness_gym.analysis.sweep import load_rows

    factor = P("factor")
    effects = pd.DataFrame(
        [{"agent": P("agent"), "factor": factor, "level": P("level_b"), "effect (pp)": -50}]
    )
    worst = pd.DataFrame([{"agent": P("agent"), "task_id": P("task_a"), "harnesses": 2}]).assign(
        worst_harness=P("harness_b"), best_harness=P("harness_a")
    )
    levels = {factor: [P("level_a"), P("level_b")]}
    rows = load_rows(crafted)
    section = episode_links_section(rows, crafted, tmp_path, [factor], levels, [P("agent")], effects, worst)
    assert "<img" not in section.raw_html and "<img" not in section.raw_markdown
    page_file = tmp_path / "report.html"
    page_file.write_text(_html("report", [section], tmp_path))
    with sync_api.sync_playwright() as p:
        browser = _chromium(p)
        try:
            page = browser.new_page()
            page.add_init_script(RECORDER)
            page.goto(page_file.as_uri(), wait_until="load")
            text = page.inner_text("body")
            links = page.eval_on_selector_all("table.hg-links a", "els => els.map(e => e.textContent)")
            assert page.evaluate("window.__pwned") == []
        finally:
            browser.close()
    for field in ("agent", "task_a", "task_b", "harness_a", "harness_b"):
        assert P(field) in text, field
    assert f"{factor}={P('level_b')}" in links and P("harness_b") in links
