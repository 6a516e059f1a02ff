"""The two views a run is scored in, and which one is canonical: the one place
that says so (metrics, reports, compare and the run's progress read it here).

* canonical: a system error still there after the retries (an unresolved
  one) counts as an unsuccessful attempt in every figure (pass@1, pass@k,
  pass^k, observed k/k, cost per success, cost per reliable task). Leaving
  it out would let any unresolved error, self-inflicted or not, raise a
  score; the unresolved errors are stated beside the figures by cause.
* errors excluded (a diagnostic): system errors are outside every
  denominator, as tbx scored before; it shows what the agent did on the
  attempts that were judged.

A run without unresolved system errors has the same figures in both.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CANONICAL", "DIAGNOSTIC", "ScoreView", "view_label", "view_title"]


class ScoreView(StrEnum):
    CANONICAL = "canonical"
    ERRORS_EXCLUDED = "errors_excluded"

    @property
    def counts_errors_as_failures(self) -> bool:
        return self is ScoreView.CANONICAL


CANONICAL = ScoreView.CANONICAL
DIAGNOSTIC = ScoreView.ERRORS_EXCLUDED

_TITLES = {
    ScoreView.CANONICAL: "canonical",
    ScoreView.ERRORS_EXCLUDED: "diagnostic, system errors excluded",
}
_LABELS = {
    ScoreView.CANONICAL: "canonical: an unresolved system error counts as a failed attempt",
    ScoreView.ERRORS_EXCLUDED: "diagnostic: system errors excluded from every denominator",
}


def view_title(view: ScoreView) -> str:
    """A short name for headings and table titles."""
    return _TITLES[view]


def view_label(view: ScoreView) -> str:
    """What the view does with system errors, in one line."""
    return _LABELS[view]
