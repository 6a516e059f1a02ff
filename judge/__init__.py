"""Reading an attempt's terminal state and judging it against the golden end state.

    from judge import decide, dump_canonical, state_hash

The public names are listed in `__all__`; import them from here rather than
from the submodules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lazy_exports import lazy_exports

if TYPE_CHECKING:
    from judge.bench_effects import (
        YESNO_SERVERS,
        effects_object,
        state_diff,
    )
    from judge.canonical import (
        State,
        canonical_bytes,
        canonical_source_hash,
        canonical_state,
        dump_canonical,
        dump_dsn,
        json_safe,
        same_value,
        stable_rows,
        state_hash,
    )
    from judge.effects import (
        StateShapeError,
        compute_effects,
        golden_differences,
        table_differences,
    )
    from judge.record_files import (
        atomic_write,
        initial_state_of,
        read_attempt,
        terminal_state_of,
        write_attempt,
        write_state,
    )
    from judge.records import (
        AttemptRecord,
        Difference,
        Effects,
        GoldenState,
        RowEffect,
        RubricAnswer,
        TableEffects,
        ToolCallView,
        Verdict,
    )
    from judge.rubric import (
        MAX_TOKENS,
        Complete,
        Completion,
        JudgeReplyError,
        JudgeUnavailable,
        RubricJudge,
        parse_judge_reply,
    )
    from judge.rubric_style import (
        DEFAULT_RUBRIC_STYLE,
        RUBRIC_STYLES,
        UNRECORDED_RUBRIC_STYLE,
        RubricStyle,
        recorded_rubric_style,
    )
    from judge.signature import (
        failure_signature,
        unrecovered_errors,
    )
    from judge.test_function import (
        ErrorCause,
        JudgeCall,
        Limit,
        TestFunctionResult,
    )
    from judge.verdict import (
        InitialStateMismatch,
        decide,
        limit_verdict,
    )

# name -> the module that defines it; imported on first use, so `import judge`
# (and its light submodules) stays cheap for the command line. The
# TYPE_CHECKING block above names the same (tests/unit/test_import_rules.py).
_EXPORTS: dict[str, str] = {
    "Completion": "judge.rubric",
    "DEFAULT_RUBRIC_STYLE": "judge.rubric_style",
    "RUBRIC_STYLES": "judge.rubric_style",
    "UNRECORDED_RUBRIC_STYLE": "judge.rubric_style",
    "RubricStyle": "judge.rubric_style",
    "recorded_rubric_style": "judge.rubric_style",
    "YESNO_SERVERS": "judge.bench_effects",
    "effects_object": "judge.bench_effects",
    "state_diff": "judge.bench_effects",
    "ErrorCause": "judge.test_function",
    "JudgeCall": "judge.test_function",
    "Limit": "judge.test_function",
    "TestFunctionResult": "judge.test_function",
    "AttemptRecord": "judge.records",
    "Complete": "judge.rubric",
    "Difference": "judge.records",
    "Effects": "judge.records",
    "GoldenState": "judge.records",
    "InitialStateMismatch": "judge.verdict",
    "JudgeReplyError": "judge.rubric",
    "JudgeUnavailable": "judge.rubric",
    "MAX_TOKENS": "judge.rubric",
    "RowEffect": "judge.records",
    "RubricAnswer": "judge.records",
    "RubricJudge": "judge.rubric",
    "State": "judge.canonical",
    "StateShapeError": "judge.effects",
    "TableEffects": "judge.records",
    "ToolCallView": "judge.records",
    "Verdict": "judge.records",
    "atomic_write": "judge.record_files",
    "canonical_bytes": "judge.canonical",
    "canonical_source_hash": "judge.canonical",
    "canonical_state": "judge.canonical",
    "compute_effects": "judge.effects",
    "decide": "judge.verdict",
    "dump_canonical": "judge.canonical",
    "dump_dsn": "judge.canonical",
    "failure_signature": "judge.signature",
    "golden_differences": "judge.effects",
    "initial_state_of": "judge.record_files",
    "json_safe": "judge.canonical",
    "limit_verdict": "judge.verdict",
    "parse_judge_reply": "judge.rubric",
    "read_attempt": "judge.record_files",
    "same_value": "judge.canonical",
    "stable_rows": "judge.canonical",
    "state_hash": "judge.canonical",
    "table_differences": "judge.effects",
    "terminal_state_of": "judge.record_files",
    "unrecovered_errors": "judge.signature",
    "write_attempt": "judge.record_files",
    "write_state": "judge.record_files",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
