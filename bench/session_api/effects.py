"""What `/get_effects` answers for a session's server: judge.bench_effects (one home,
shared with the test functions' `x.effects`)."""

from judge.bench_effects import ROOT, diff, effects_object

__all__ = ["ROOT", "diff", "effects_object"]
