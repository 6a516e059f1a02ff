"""A Bench server's effects, the reference's fields, computed host-side from tbx's
canonical states, never inside the sandbox: what the Session API's `/get_effects`
answers and what a test function's `x.effects[server]` holds (bench.evaluator).

The hashes are `judge.canonical.state_hash` (canonicalization.md: the reference's
stable form, reproduced hash-for-hash); `diff` is the reference's deep diff of the
stable result and golden states (spec/zendesk-and-engine.md §4.9), empty iff the
hashes are equal. The `*_db_state` objects are tbx's canonical (stable) states
(a non-finite number, which no tool or data patch stores, would be its JSON5 text):
the reference sends its raw states there (unstable fields included); no client
reads them but for debugging.
"""

from __future__ import annotations

from typing import Any

from judge.canonical import State, json_safe, same_value, state_hash

ROOT = "root"
# The servers whose effects carry `rubrics_yesno` (the others have no such key).
YESNO_SERVERS = frozenset({"external_booking_v1", "sandbox_neobank_support_v1"})


def _type_name(value: Any) -> str:
    # Python's names, as the reference reports them; bool before int (bool is an int there).
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    return "list" if isinstance(value, list) else type(value).__name__


def _child(path: str, key: str) -> str:
    return key if path == ROOT else f"{path}.{key}"


def state_diff(result: Any, golden: Any, path: str = ROOT) -> list[dict[str, Any]]:
    """The reference's deep diff of `result` against `golden` (both stable states)."""
    if result is None and golden is None:
        return []
    if result is None:
        return [
            {
                "path": path,
                "type": "result is None, golden is not",
                "result": None,
                "golden": _type_name(golden),
            }
        ]
    if golden is None:
        return [
            {
                "path": path,
                "type": "result is not None, golden is None",
                "result": _type_name(result),
                "golden": None,
            }
        ]
    tr, tg = _type_name(result), _type_name(golden)
    if tr != tg:
        return [{"path": path, "type": "type mismatch", "result": tr, "golden": tg}]
    out: list[dict[str, Any]] = []
    if isinstance(result, dict):
        for key in sorted(set(result) | set(golden)):
            child = _child(path, key)
            if key not in result:
                out.append({"path": child, "type": "missing in result (present in golden)"})
            elif key not in golden:
                out.append({"path": child, "type": "present in result (missing in golden)"})
            else:
                out.extend(state_diff(result[key], golden[key], child))
        return out
    if isinstance(result, list):
        if len(result) != len(golden):
            out.append(
                {"path": path, "type": "length mismatch", "result": len(result), "golden": len(golden)}
            )
        for i in range(max(len(result), len(golden))):
            child = f"{path}[{i}]"
            if i >= len(result):
                out.append({"path": child, "type": "missing in result (present in golden)"})
            elif i >= len(golden):
                out.append({"path": child, "type": "present in result (missing in golden)"})
            else:
                out.extend(state_diff(result[i], golden[i], child))
        return out
    if not same_value(result, golden):
        out.append({"path": path, "type": "value mismatch", "result": result, "golden": golden})
    return out


def effects_object(
    initial: State,
    result: State | None,
    golden: State,
    *,
    rubrics: Any,
    rubrics_yesno: list[str] | None,
) -> dict[str, Any]:
    """One server's effects in the reference's key order; `rubrics_yesno` None: the
    server has no such key (only the travel and neobank servers carry it). `result`
    None: the session's own calls took its database down (no result state, no hash:
    the diff says the result is missing, which no golden state matches)."""
    # The states as the hashes see them; the objects answered in a JSON-safe form, so the
    # effects of any state a row can hold serialise (a stored NaN is "NaN").
    out: dict[str, Any] = {
        "initial_db_state": json_safe(initial),
        "result_db_state": json_safe(result),
        "result_db_hash": None if result is None else state_hash(result),
        "golden_db_state": json_safe(golden),
        "golden_db_hash": state_hash(golden),
        "diff": json_safe(state_diff(result, golden)),
        "rubrics": rubrics,
    }
    if rubrics_yesno is not None:
        out["rubrics_yesno"] = rubrics_yesno
    return out
