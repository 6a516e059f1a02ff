"""`write_report`: report.md, report.html and report.json of a report into a directory."""

from __future__ import annotations

import json
from pathlib import Path

from bench.report.build import Report, report_json
from bench.report.html import render_html
from bench.report.markdown import render_markdown


def write_report(report: Report, out: str | Path) -> dict[str, Path]:
    """Write report.md, report.html and report.json into `out` (created if needed)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "report.md", "html": out / "report.html", "json": out / "report.json"}
    paths["md"].write_text(render_markdown(report))
    view = out / "view" / "index.html"  # written by `tbx view`
    paths["html"].write_text(render_html(report, "view/index.html" if view.is_file() else None))
    paths["json"].write_text(json.dumps(report_json(report), indent=2) + "\n")
    return paths
