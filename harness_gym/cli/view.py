"""``harness-gym view RUN_DIR``: browse a run's episodes, and a pair of them side by side.

Writes the viewer's static folder (:mod:`harness_gym.analysis.viewer`; default
``RUN_DIR/view``), which opens from disk; ``--serve`` also serves it on localhost and opens it
in the browser, until Ctrl-C: the view's files and the screenshots it shows, nothing else. A
folder holding files the viewer did not write is refused, never overwritten.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from harness_gym.cli.common import output_dir, refuse_ignored, remember_defaults, tcp_port

HELP = "browse a run's episodes and recorded trajectories (a local page; pairs side by side)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``harness-gym view``."""
    parser.add_argument("dir", help="a run folder (written by harness-gym sweep or search)")
    parser.add_argument("--out", default=None, help="the page's folder (default DIR/view)")
    parser.add_argument("--serve", action="store_true", help="serve the page on localhost and open it")
    parser.add_argument(
        "--port", type=tcp_port(0), default=0, help="with --serve: the port (default: any free one)"
    )
    parser.add_argument("--no-open", action="store_true", help="with --serve: do not open a browser")
    remember_defaults(parser)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``harness-gym view``."""
    from harness_gym.analysis.sweep import read_meta
    from harness_gym.analysis.viewer import write_view

    if not args.serve:
        refuse_ignored(args, ["port", "no_open"], "they apply with --serve only")
    read_meta(args.dir)  # not a run folder: one clear error before anything is written
    if args.out is not None:
        output_dir(args.out)
    page = write_view(args.dir, args.out)
    out.write(f"wrote {page} (open it in a browser; it needs no server)\n")
    out.flush()
    if args.serve:
        serve(page.parent, args.dir, args.port, not args.no_open, out)
    return 0


def serve(folder: object, run_dir: object, port: int, open_browser: bool, out: TextIO) -> None:
    """Serve the view ``folder`` (its files and the run files it reads only) on 127.0.0.1
    until interrupted (:mod:`harness_gym.analysis.viewer_server`)."""
    import webbrowser

    from harness_gym.analysis.viewer_server import make_server

    with make_server(str(folder), str(run_dir), port) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
        out.write(f"serving {url} (Ctrl-C stops)\n")
        out.flush()
        if open_browser:
            webbrowser.open(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
