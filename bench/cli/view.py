"""`tbx view OUT [OUT ...] [--out DIR] [--dataset DIR] [--serve [--port N] [--allow-host NAME]]`:
write the static offline site of tasks and attempts (bench.view) next to the
report, write that report (linked to the site), optionally serve both on
127.0.0.1.

Where it goes: one run -> OUT/view/ and OUT/report.html; several runs ->
DIR/view/ and DIR/report.html (DIR: --out, default ./tbx-report, where
`tbx report` puts a multi-run report).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.terminal_text import printable
from bench.web_guard import GuardPolicy, add_guard_arguments

VIEW_DIR = "view"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="browse tasks and attempts: a static offline site next to report.html")
    p.add_argument(
        "dirs", nargs="+", metavar="OUT", help="run directories (output of tbx run / judge regrade)"
    )
    p.add_argument(
        "--out", metavar="DIR", help="where report.html and view/ go (default: the run dir, or ./tbx-report)"
    )
    p.add_argument(
        "--dataset", metavar="DIR", help="benchmark directory for task texts (default: the manifest's)"
    )
    p.add_argument("--no-report", action="store_true", help="write the site only, leave report.html alone")
    p.add_argument("--serve", action="store_true", help="then serve it on 127.0.0.1 until Ctrl-C")
    p.add_argument("--port", type=int, default=0, help="port for --serve (default: any free port)")
    add_guard_arguments(p, token=False)
    p.set_defaults(fn=view_command)


def view_command(args: argparse.Namespace) -> int:
    from bench.report.build import build_report
    from bench.report.write import write_report
    from bench.run.results import ResultsError
    from bench.view.site import SiteError, build_site
    from bench.web_guard import policy_from_args

    try:  # before the site is built, so a typo does not wait for it
        policy = policy_from_args(args.allow_host, args.allow_origin) if args.serve else None
    except ValueError as exc:
        print(f"tbx view: {printable(exc)}", file=sys.stderr)
        return 2
    dirs = [Path(d) for d in args.dirs]
    base = Path(args.out) if args.out else (dirs[0] if len(dirs) == 1 else Path("tbx-report"))
    site = base / VIEW_DIR
    report_html = base / "report.html"
    write = not args.no_report
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty() and (done == total or done - last[0] >= max(50, total // 50)):
            last[0] = done
            print(f"\rtbx view: {done}/{total} attempts", end="" if done < total else "\n", file=sys.stderr)

    try:
        result = build_site(
            dirs,
            site,
            dataset=Path(args.dataset) if args.dataset else None,
            report_href="../report.html" if write or report_html.exists() else None,
            progress=progress,
        )
        if write:
            write_report(build_report(dirs), base)
    except (ResultsError, SiteError) as exc:
        print(f"tbx view: {printable(exc)}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"tbx view: {printable(note)}", file=sys.stderr)
    print(
        f"wrote {site / 'index.html'}: {result.tasks} tasks, {result.attempts} attempts "
        f"({result.rendered} pages rendered, the rest unchanged) from {result.runs} run(s) "
        f"in {result.seconds:.1f} s" + (f"; linked from {report_html}" if write else "")
    )
    if not args.serve:
        return 0
    return serve(base, args.port, policy)


def serve(root: Path, port: int, policy: GuardPolicy | None = None) -> int:
    from bench.view.serve import make_server

    try:
        server = make_server(root, port, policy)
    except OSError as exc:
        print(f"tbx view: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    host, bound = server.server_address[:2]
    print(f"serving http://{host!s}:{bound}/{VIEW_DIR}/index.html (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
