"""`tbx compare`'s links into `tbx view` sites: a flipped task links to its task
page where a site holds one: the compare output's own `view/` (`tbx view A B
--out DIR`, both runs side by side) and each run's `RUN/view/`. Here, above
bench.report (which renders the comparison), since it reads the view's pages."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bench.report.compare import Comparison, RunInfo
from bench.run.results import RunDir
from bench.view.site import SITE_MARKER
from bench.view.summary import task_href


def _views(base: Path, runs: Sequence[tuple[RunInfo, RunDir]]) -> list[tuple[str, Path]]:
    found = [("view", base / "view"), *((info.label, Path(run.path) / "view") for info, run in runs)]
    seen: set[Path] = set()
    out = []
    for name, site in found:
        key = site.resolve()
        if key not in seen and (site / SITE_MARKER).is_file():
            seen.add(key)
            out.append((name, site))
    return out


def add_view_links(comparison: Comparison, runs: Sequence[tuple[RunInfo, RunDir]], base: Path) -> None:
    """Each flipped task of each pair -> {site name: href relative to `base`} for every
    `tbx view` site that has its task page."""
    views = _views(base, runs)
    for pair in comparison.pairs:
        pair.links = {}
        for task in sorted(pair.flips.tasks()):
            hrefs = {
                name: os.path.relpath(site / task_href(task), base)
                for name, site in views
                if (site / task_href(task)).is_file()
            }
            if hrefs:
                pair.links[task] = hrefs
