"""The site's pages as HTML text. Every value is escaped; links are relative,
so the site opens from file:// and can be moved as one directory.

* `tasks_page`  the shell of index.html (rows come from data/tasks.js)
* `tasks_data`  data/tasks.js: every task row, with one mark strip per run
* `task_page`   the task's goal, the simulated user's private context, the golden
                calls, every attempt of every run as a row
* `attempt_page` the conversation, the effects diff against golden, rubrics, timings
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from bench.dataset import Task
from bench.report.tables import fmt_usd
from bench.report.views import CANONICAL, DIAGNOSTIC, view_title
from bench.rollout.trajectory import Message, ToolCall, Trajectory
from bench.view.diff import RowDiff, TableDiff
from bench.view.load import Attempt, Run
from bench.view.summary import ERROR, FAIL, PASS, Summary, TaskRow, task_href
from judge import Effects, ToolCallView, Verdict

MARK_TEXT = {PASS: "pass", FAIL: "fail", ERROR: "system error", "n": "not run"}


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2, default=str)


def _page(title: str, root: str, body: Sequence[str], scripts: Sequence[str] = ()) -> str:
    """`root` is the relative path from the page to the site root ("", "../", "../../")."""
    tags = "".join(f'<script src="{root}{s}"></script>' for s in scripts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{_e(title)}</title><link rel="stylesheet" href="{root}assets/view.css"></head>'
        "<body>\n" + "\n".join(body) + tags + "\n</body></html>\n"
    )


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "", num: Sequence[int] = ()
) -> str:
    """Cells are HTML already; `num` are right-aligned column indexes."""
    head = "".join(f"<th{' class=num' if i in num else ''}>{_e(h)}</th>" for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=num' if i in num else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fmt_num(x: float | int | None, digits: int = 1) -> str:
    if x is None:
        return "—"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:,.{digits}f}"


def _sig(signature: str | None) -> str:
    return f'<span class="sig sig-{_e(signature)}">{_e(signature)}</span>' if signature else ""


def _verdict(mark: str) -> str:
    cls = {PASS: "pass", FAIL: "fail", ERROR: "err"}.get(mark, "muted")
    return f'<span class="{cls}">{_e(MARK_TEXT.get(mark, mark))}</span>'


def _strip(per_run: Sequence[Summary | None], root: str, current: str | None = None) -> str:
    marks = []
    for i, s in enumerate(per_run):
        if s is None:
            marks.append(f'<span class="m-n" title="repeat {i}: not run"></span>')
            continue
        title = f"repeat {i}: {MARK_TEXT[s.mark]}" + (f" [{s.signature}]" if s.signature else "")
        here = ' style="outline:2px solid #222"' if s.attempt_id == current else ""
        marks.append(f'<a class="m-{s.mark}" href="{root}{_e(s.href)}" title="{_e(title)}"{here}></a>')
    return '<span class="marks">' + "".join(marks) + "</span>"


# ---- tasks page ---------------------------------------------------------------


def tasks_page(runs: Sequence[Run], notes: Sequence[str], report_href: str | None) -> str:
    meta = [
        f"<b>{_e(r.label)}</b>: {len(r.rows)} attempts, agent {_e(r.agent or '—')}"
        + (f" + harness {_e(', '.join(r.harness))}" if r.harness else "")
        + (f", rubric judge {_e(r.rubric_judge)}" if r.rubric_judge else "")
        + ", "
        + f"K={r.repeats} <code>{_e(r.path)}</code>"
        for r in runs
    ]
    body = [
        '<nav class="crumbs">tbx view'
        + (f' · <a href="{_e(report_href)}">report</a>' if report_href else "")
        + "</nav>",
        "<h1>Tasks</h1>",
        '<p class="note">' + "<br>".join(meta) + "</p>",
        *[f'<p class="note">{_e(n)}</p>' for n in notes],
        '<p class="note">One row per task; per run, one mark per repeat (green pass, red fail, '
        "yellow system error, grey not run; a mark opens the attempt) and passes/valid attempts. "
        "Signature filter: tasks with at least one attempt of that signature. "
        "Flaky: some but not all valid attempts of a run passed.</p>",
        '<div class="filters" id="filters"></div>',
        '<div class="pager" id="pager"></div>',
        '<table id="tasks"><thead></thead><tbody></tbody></table>',
        "<noscript><p>The task list needs JavaScript (it runs from local files only).</p></noscript>",
    ]
    return _page("tbx view: tasks", "", body, scripts=("data/tasks.js", "assets/tasks.js"))


def tasks_data(rows: Sequence[TaskRow], runs: Sequence[Run]) -> str:
    tasks = []
    for t in rows:
        sigs = t.signatures()
        labels = t.labels()
        passed, valid, errors = t.passes()
        top_sig = sigs.most_common(1)[0][0] if sigs else None
        top_label = labels.most_common(1)[0] if labels else None
        per_run = []
        for strip in t.runs:
            per_run.append(
                {
                    "m": "".join(s.mark if s else "n" for s in strip),
                    "a": [s.href if s else None for s in strip],
                    "g": [s.signature if s else None for s in strip],
                    "p": sum(1 for s in strip if s and s.mark == PASS),
                    "n": sum(1 for s in strip if s and s.mark in (PASS, FAIL)),
                    "e": sum(1 for s in strip if s and s.mark == ERROR),
                }
            )
        tasks.append(
            {
                "id": t.task_id,
                "d": t.domain,
                "href": t.href,
                "runs": per_run,
                "p": passed,
                "n": valid,
                "e": errors,
                "flaky": t.flaky(),
                "s": top_sig,
                "sc": dict(sigs),
                "diff": top_label[0] if top_label else None,
                "dc": top_label[1] if top_label else 0,
            }
        )
    data = {
        "runs": [{"label": r.label, "k": r.repeats} for r in runs],
        "domains": sorted({t.domain for t in rows}),
        "signatures": sorted({s for t in rows for s in t.signatures()}),
        "tasks": tasks,
    }
    return "window.TBX_TASKS = " + json.dumps(data, ensure_ascii=False, separators=(",", ":")) + ";\n"


# ---- task page ----------------------------------------------------------------


def task_page(
    row: TaskRow,
    runs: Sequence[Run],
    task: Task | None,
    golden_calls: Sequence[tuple[str, dict[str, Any]]],
    rubrics: Sequence[str],
    dataset_note: str | None,
) -> str:
    root = "../"
    passed, valid, errors = row.passes()
    body = [
        f'<nav class="crumbs"><a href="{root}index.html">tasks</a> › {_e(row.task_id)}</nav>',
        f"<h1>{_e(row.task_id)}</h1>",
        f"<p>domain <b>{_e(row.domain)}</b> · passed {passed}/{valid + errors} attempts"
        + (
            f" ({view_title(CANONICAL)}: {errors} unresolved system errors count as failed) · "
            f"{passed}/{valid} valid attempts ({view_title(DIAGNOSTIC)})"
            if errors
            else ""
        )
        + (f" · scenario <code>{_e(task.scenario)}</code>" if task else "")
        + "</p>",
    ]
    if task is None:
        body.append(
            f'<p class="note">Task text not available: {_e(dataset_note or "not in the dataset")}.</p>'
        )
    else:
        body += [
            "<h2>The user's goal</h2>",
            f'<div class="msg user"><div class="text">{_e(task.query)}</div></div>',
        ]
        body.append("<h2>Private context of the simulated user</h2>")
        body.append(
            f'<div class="msg user"><div class="text">{_e(task.user_context)}</div></div>'
            if task.user_context
            else '<p class="note">None: the simulated user knew only the goal.</p>'
        )
        if rubrics:
            body.append("<h2>Rubrics (yes/no, asked of the final message)</h2>")
            body.append("<ol>" + "".join(f"<li>{_e(q)}</li>" for q in rubrics) + "</ol>")
        body.append(f'<h2 id="golden">Golden calls ({len(golden_calls)})</h2>')
        body.append(
            "<ol>"
            + "".join(
                f'<li><span class="call">{_e(tool)}</span><pre>{_arguments(params)}</pre></li>'
                for tool, params in golden_calls
            )
            + "</ol>"
        )
    header = [
        "repeat",
        "verdict",
        "signature",
        "finish reason",
        "turns (user/agent)",
        "tool calls",
        "tokens (all roles)",
        "cost (all roles)",
        "duration s",
        "first difference",
    ]
    for run, strip in zip(runs, row.runs, strict=True):
        attempts = [s for s in strip if s is not None]
        body.append(f"<h2>Attempts: {_e(run.label)} {_strip(strip, root)}</h2>")
        if not attempts:
            body.append('<p class="note">No attempt of this task in this run.</p>')
            continue
        rows = []
        for s in attempts:
            turns = "—" if s.user_turns is None else f"{s.user_turns}/{s.agent_turns}"
            calls = fmt_num(s.tool_calls) + (
                f' <span class="fail">({s.tool_errors} err)</span>' if s.tool_errors else ""
            )
            detail = s.first_difference or s.error or ""
            rows.append(
                [
                    f'<a href="{root}{_e(s.href)}">#{s.repeat}</a>',
                    _verdict(s.mark),
                    _sig(s.signature),
                    _e(s.finish_reason or "—"),
                    turns,
                    calls,
                    fmt_num(s.tokens),
                    fmt_usd(s.cost),
                    fmt_num(s.duration),
                    f"<code>{_e(detail[:200])}</code>" if detail else "",
                ]
            )
        body.append(_table(header, rows, "attempts", num=(4, 5, 6, 7, 8)))
    return _page(f"tbx view: {row.task_id}", root, body)


# ---- attempt page -------------------------------------------------------------


def _message(who: str, cls: str, inner: str, extra: str = "") -> str:
    return f'<div class="msg {cls}"{extra}><div class="who">{_e(who)}</div>{inner}</div>'


def _text(text: str | None) -> str:
    return f'<div class="text">{_e(text)}</div>' if text else ""


def _arguments(raw: Any) -> str:
    """Short argument objects on one line, longer ones indented."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return _e(raw)
    flat = _json(raw)
    return _e(flat if len(flat) <= 100 else _pretty(raw))


def _reply(
    tool: str, result: str, failed: bool, latency_ms: float | None, note: str = "", after: str = ""
) -> str:
    badge = '<span class="badge">error</span>' if failed else ""
    lat = f' <span class="muted">{latency_ms:.0f} ms</span>' if latency_ms else ""
    return _message(
        f"tool reply: {tool}",
        "tool error" if failed else "tool",
        f"{badge}{lat}{note}<pre>{_e(result)}</pre>{after}",
        ' data-error="1"' if failed else "",
    )


def revive_command(a: Attempt) -> str | None:
    """`tbx up --from RUN_DIR ATTEMPT`: the attempt's end state live again (bench.run.revive);
    None when it left no initial state to start from (a system error before its sandbox)."""
    rec = a.record
    if rec is None or (rec.initial_state is None and rec.initial_state_path is None):
        return None
    return f"tbx up --from {shlex.quote(str(a.run.path.resolve()))} {shlex.quote(a.attempt_id)}"


def _step(command: str | None, step: int | None) -> str:
    """The command for the state right after call `step` (of the record's prefix + trajectory)."""
    if command is None or step is None:
        return ""
    return (
        f'<div class="note revive" data-step="{step}">the state right after this call: '
        f"<code>{_e(command)} --step {step}</code></div>"
    )


def call_steps(traj: Trajectory, recorded: Sequence[ToolCallView], prefix: int) -> dict[int, int]:
    """The trajectory's calls (by index) that reached the proxy -> their step in the record
    (prefix + trajectory, 1-based): each call matched in order with the next recorded call of
    the same tool and arguments (calls answered locally were never recorded)."""
    out: dict[int, int] = {}
    j = 0
    for tc in sorted(traj.tool_calls, key=lambda c: c.index):
        if not tc.via_mcp or tc.builtin:
            continue
        k = next(
            (
                k
                for k in range(j, len(recorded))
                if recorded[k].tool == tc.tool and recorded[k].arguments == (tc.arguments or {})
            ),
            None,
        )
        if k is not None:
            out[tc.index] = prefix + k + 1
            j = k + 1
    return out


def conversation(
    traj: Trajectory, command: str | None = None, steps: Mapping[int, int] | None = None
) -> list[str]:
    """Messages in order: each tool call followed by its exact reply (and, with `command`,
    the `tbx up --from` command for the state right after it: `steps`, see call_steps)."""
    calls = {c.call_id: c for c in traj.tool_calls if c.call_id}
    replies: dict[str, Message] = {
        m.tool_call_id: m for m in traj.messages if m.role == "tool" and m.tool_call_id
    }
    users = iter(traj.user_turns)
    shown: set[str] = set()
    out: list[str] = []
    for m in traj.messages:
        if m.role == "user":
            turn = next(users, None)
            who = (
                "user (the task's goal)"
                if turn is not None and turn.source == "query"
                else "tbx state check (harness)"
                if turn is not None and turn.source == "harness"
                else ("simulated user" if turn is None or turn.source == "llm" else "scripted user")
            )
            # (a trajectory written before `stand_in` was recorded: an empty completion)
            if turn is not None and (turn.stand_in or (turn.source == "llm" and turn.raw == "")):
                who = "tbx, standing in for an empty simulated-user reply"
            out.append(_message(who, "user", _text(m.content)))
        elif m.role == "assistant":
            inner = _text(m.content)
            for tc in m.tool_calls or []:
                fn = tc.get("function") or {}
                parsed = calls.get(tc.get("id") or "")
                # the recorded call holds the arguments parsed already (None: not a JSON object)
                args = (
                    parsed.arguments
                    if parsed is not None and parsed.arguments is not None
                    else fn.get("arguments")
                )
                inner += f'<div class="call">→ {_e(fn.get("name"))}</div><pre>{_arguments(args)}</pre>'
            out.append(_message("agent", "assistant", inner))
            for tc in m.tool_calls or []:
                cid = tc.get("id")
                reply = replies.get(cid) if cid else None
                rec: ToolCall | None = calls.get(cid) if cid else None
                if reply is None and rec is None:
                    continue
                shown.add(cid or "")
                name = (rec.tool if rec else None) or (reply.name if reply else "") or ""
                note = ""
                if rec is not None and not rec.via_mcp:
                    note = ' <span class="muted">(answered locally, not sent to the server)</span>'
                if rec is not None and rec.approval is not None:
                    # approval: the user's answer before the call was sent (or instead of it)
                    verdict = "approved" if rec.approval.approved else "refused"
                    note += (
                        f' <span class="badge hint" data-approval="{verdict}">approval: {verdict}</span>'
                        f' <span class="muted">{_e(rec.approval.reason)}</span>'
                    )
                if rec is not None and rec.hint:
                    # error-hints: the exact reply below, the category the model read after it here
                    note += (
                        f' <span class="badge hint" data-hint="{_e(rec.hint)}">'
                        f"error-hints: {_e(rec.hint.replace('_', ' '))}</span>"
                    )
                out.append(
                    _reply(
                        name,
                        rec.result
                        if rec is not None and rec.hint
                        else (reply.content or "" if reply is not None else (rec.result if rec else "")),
                        bool(rec and (rec.is_error or rec.error_envelope)),
                        rec.latency_ms if rec else None,
                        note,
                        _step(command, (steps or {}).get(rec.index) if rec is not None else None),
                    )
                )
        elif m.role == "tool" and (m.tool_call_id or "") not in shown:
            rec = calls.get(m.tool_call_id or "")
            out.append(
                _reply(
                    m.name or "", m.content or "", bool(rec and (rec.is_error or rec.error_envelope)), None
                )
            )
    return out


def proxy_calls(calls: Sequence[ToolCallView], command: str | None = None, prefix: int = 0) -> list[str]:
    """The tool proxy's record, when no trajectory file exists."""
    out = []
    for i, c in enumerate(calls):
        out.append(
            _message(
                "agent",
                "assistant",
                f'<div class="call">→ {_e(c.tool)}</div><pre>{_arguments(c.arguments)}</pre>',
            )
        )
        out.append(_reply(c.tool, c.result, c.failed, c.latency_ms, after=_step(command, prefix + i + 1)))
    return out


def _value(v: Any) -> str:
    return f"<code>{_e(_json(v))}</code>"


def _row_diff(table: str, rd: RowDiff) -> str:
    attrs = f'data-table="{_e(table)}" data-key="{_e(rd.key)}" data-what="{_e(rd.what)}"'
    head = f'<div class="diffrow" {attrs}><span class="what">{_e(rd.what)}</span> <code>{_e(table)}[{_e(rd.key)}]</code>'
    if rd.row is not None and not rd.fields:
        cls = "expected" if rd.what in ("required row missing",) else "got"
        col = "expected (golden)" if cls == "expected" else "got (attempt)"
        if rd.what == "unexpected delete":
            col = "the row golden kept (deleted by the attempt)"
            cls = "expected"
        rows = [[f"<code>{_e(k)}</code>", f"{_value(v)}"] for k, v in sorted(rd.row.items())]
        table_html = _table(["field", col], rows, f"row {cls}")
        return head + table_html + "</div>"
    diffs = {f.field: f for f in rd.fields}
    body = []
    # the differing fields first, then the rest of the attempt's row for context
    fields = list(diffs) + [f for f in (rd.got_row or {}) if f not in diffs]
    for name in fields:
        fd = diffs.get(name)
        if fd is not None:
            body.append(
                f'<tr class="hl" data-field="{_e(name)}" data-what="{_e(fd.what)}"><td><code>{_e(name)}</code></td>'
                f'<td class="expected">{_value(fd.expected)}</td><td class="got">{_value(fd.got)}</td>'
                f"<td>{_e(fd.what)}</td></tr>"
            )
        else:
            assert rd.got_row is not None
            body.append(
                f'<tr class="same"><td><code>{_e(name)}</code></td><td colspan="2" class="muted">'
                f"{_value(rd.got_row.get(name))}</td><td></td></tr>"
            )
    return (
        head
        + '<table class="fields"><thead><tr><th>field</th><th>expected (golden)</th><th>got (attempt)</th>'
        + "<th>difference</th></tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table></div>"
    )


def effects_diff(verdict: Verdict, tables: Sequence[TableDiff]) -> list[str]:
    if verdict.strict:
        return [
            '<p class="pass">The terminal state equals the golden end state '
            f"(canonical hash <code>{_e(verdict.terminal_hash[:16])}</code>).</p>"
        ]
    out = [
        f"<p>{len(verdict.differences)} differences from the golden end state "
        f"(terminal <code>{_e(verdict.terminal_hash[:12])}</code>, golden <code>{_e(verdict.golden_hash[:12])}</code>), "
        "by table and primary key. Expected = golden, got = the attempt.</p>"
    ]
    for t in tables:
        counts = ", ".join(f"{n} {what}" for what, n in t.counts().items())
        out.append(
            f'<h3 data-table="{_e(t.table)}">{_e(t.table)} <span class="note">{_e(counts)}</span></h3>'
        )
        out += [_row_diff(t.table, rd) for rd in t.rows]
        if t.order_expected is not None:
            out.append(
                '<div class="diffrow"><span class="what">row order</span> '
                f"expected {_value(t.order_expected)}, got {_value(t.order_got)}</div>"
            )
    return out


def own_effects(effects: Effects) -> str:
    if effects.empty:
        return '<p class="note">The attempt changed nothing.</p>'
    parts = []
    for name, te in effects.tables.items():
        lines = [
            f"<b>{_e(name)}</b>: {len(te.inserted)} inserted, {len(te.updated)} updated, {len(te.deleted)} deleted"
        ]
        for r in te.inserted:
            lines.append(f"+ <code>{_e(r.key)}</code> {_value(r.after)}")
        for r in te.updated:
            lines.append(f"~ <code>{_e(r.key)}</code> {_value(r.before)} → {_value(r.after)}")
        for r in te.deleted:
            lines.append(f"- <code>{_e(r.key)}</code> {_value(r.before)}")
        parts.append("<p>" + "<br>".join(lines) + "</p>")
    return "".join(parts)


def _retried_spend(s: Summary) -> str:
    """The tokens the retried tries of the attempt's (task, repeat) spent, when any."""
    return f" · {fmt_num(s.retried_tokens)} more tokens in retried tries" if s.retried_tokens else ""


def attempt_page(
    a: Attempt,
    s: Summary,
    strip: Sequence[Summary | None],
    tables: Sequence[TableDiff],
    task: Task | None,
    rubrics: Sequence[str],
) -> str:
    root = "../../"
    row, rec, traj = a.row, a.record, a.trajectory
    verdict = rec.verdict if rec is not None else None
    body = [
        f'<nav class="crumbs"><a href="{root}index.html">tasks</a> › '
        f'<a href="{root}{task_href(row.task_id)}">{_e(row.task_id)}</a> › {_e(a.run.label)} repeat {row.repeat}</nav>',
        f"<h1>{_e(row.task_id)} · repeat {row.repeat}</h1>",
        f"<p>{_verdict(s.mark)} {_sig(s.signature)} · run <b>{_e(a.run.label)}</b> · finish reason "
        f"<b>{_e(s.finish_reason or '—')}</b> · {fmt_num(s.tool_calls)} tool calls · "
        f"{fmt_num(s.tokens)} tokens · {fmt_usd(s.cost)} (all roles){_retried_spend(s)} · {fmt_num(s.duration)} s · other repeats {_strip(strip, root, s.attempt_id)}</p>",
        f'<p class="note">attempt <code>{_e(a.attempt_id)}</code></p>',
    ]
    command = revive_command(a)
    if command is not None:
        body.append(
            f'<p class="note revive">its end state, live again (a sandbox with its recorded calls replayed): '
            f"<code>{_e(command)}</code>; each tool reply below gives the command for the state right after it</p>"
        )
    body += [f'<p class="note">{_e(n)}</p>' for n in a.notes]
    if verdict is not None and not verdict.passed:
        why = [d.describe() for d in verdict.differences[:5]]
        more = len(verdict.differences) - len(why)
        why += [
            (
                f"judge error (its reply could not be read): {x.question}"
                if x.judge_error
                else f"rubric answered {x.answer}: {x.question}"
            )
            for x in verdict.rubric_answers
            if not x.passed
        ]
        tf = verdict.test_function
        if tf is not None and not tf.result:  # the task's test function: its failing assert
            why.insert(0, f"test function, line {tf.lineno}: {tf.line_content.strip()}")
            why.insert(1, f"assert message: {tf.message or '(none)'}")
        body.append(
            '<div class="msg error-box"><div class="who">why it failed</div><ul>'
            + "".join(f"<li><code>{_e(w)}</code></li>" for w in why)
            + (f"<li>… {more} more</li>" if more > 0 else "")
            + '</ul><a href="#effects">the effects diff</a> · <a href="#conversation">the conversation</a> · '
            + f'<a href="{root}{task_href(row.task_id)}#golden">the golden calls</a></div>'
        )
    tf = verdict.test_function if verdict is not None else None
    if tf is not None and (
        tf.prints or tf.judge_calls or (verdict is not None and verdict.reward is not None)
    ):
        asked = "".join(
            f"<li><code>{_e(c.user[-300:])}</code> → <b>{_e(c.text if c.text is not None else c.error or '')}</b></li>"
            for c in tf.judge_calls
        )
        body.append(
            '<div class="msg"><div class="who">test function</div>'
            + (
                f"<p>reward <b>{verdict.reward:g}</b></p>"
                if verdict is not None and verdict.reward is not None
                else ""
            )
            + (f"<p>judge questions</p><ul>{asked}</ul>" if asked else "")
            + (f"<p>prints</p><pre>{_e(tf.prints[-4000:])}</pre>" if tf.prints else "")
            + "</div>"
        )
    if row.system_error:
        tb = (a.error or {}).get("traceback")
        body.append(
            _message(
                f"system error: {row.error_cause} (a failed attempt in the {view_title(CANONICAL)} score, "
                f"left out of the {view_title(DIAGNOSTIC)} one)",
                "error-box",
                _text(row.error or (rec.system_error if rec else ""))
                + (f"<pre>{_e(tb)}</pre>" if tb else ""),
            )
        )
    if task is not None:
        body.append(
            f"<details><summary>The user's goal and private context</summary>"
            f'<div class="msg user"><div class="who">goal</div>{_text(task.query)}</div>'
            + (
                f'<div class="msg user"><div class="who">private context</div>{_text(task.user_context)}</div>'
                if task.user_context
                else ""
            )
            + "</details>"
        )

    prefix = len(rec.prefix) if rec is not None else 0
    if rec is not None and rec.prefix:
        body.append(f'<h2 id="prefix">Prefix ({prefix} calls)</h2>')
        body.append(
            '<p class="note">Replayed through the proxy before the agent had the episode '
            "(the client's reset or create prefix, or a fork's calls so far).</p>"
        )
        body += proxy_calls(rec.prefix, command)
    body.append('<h2 id="conversation">Conversation</h2>')
    if traj is not None:
        steps = call_steps(traj, rec.trajectory, prefix) if rec is not None else {}
        body += conversation(traj, command, steps)
        end = f"finished: <b>{_e(traj.finish_reason)}</b>" + (
            f" (by {_e(traj.done_by)})" if traj.done_by else ""
        )
        body.append(f"<p>{end}</p>")
        if traj.error:
            # what stopped the conversation: tbx's side (the row's cause) or the agent's own
            who = f"system error: {row.error_cause}" if row.system_error else "agent error"
            body.append(_message(who, "error-box", _text(traj.error), ' data-error="1"'))
    elif rec is not None and rec.trajectory:
        body.append('<p class="note">No trajectory file: the tool calls as the tool proxy recorded them.</p>')
        body += proxy_calls(rec.trajectory, command, prefix)
    else:
        body.append('<p class="note">No conversation was recorded.</p>')
    if rec is not None and rec.final_message:
        body.append(_message("final message", "assistant", _text(rec.final_message)))

    body.append('<h2 id="effects">Effects against the golden end state</h2>')
    if verdict is None:
        body.append(
            '<p class="note">No verdict recorded (a system error, or an attempt record without one).</p>'
        )
    else:
        body += effects_diff(verdict, tables)
        body.append("<details><summary>What the attempt changed (against the initial state)</summary>")
        body.append(own_effects(verdict.effects) + "</details>")

    body.append("<h2>Rubrics</h2>")
    answers = verdict.rubric_answers if verdict is not None else []
    if answers:
        rows = [
            [
                _e(x.question),
                f'<span class="{"pass" if x.passed else "fail"}">{_e(x.answer or "judge error")}</span>',
                # the reference style gives no reason: its one-word reply is what there is
                _e(x.reason or x.error or (f"replied: {x.raw}" if x.raw else "")),
            ]
            for x in answers
        ]
        body.append(_table(["question", "answer", "judge's reason"], rows, "rubrics"))
    elif rubrics and (row.model_extra or {}).get("rubrics_skipped"):
        body.append('<p class="note">The task has rubrics; this run skipped them (--skip-rubrics):</p>')
        body.append("<ol>" + "".join(f"<li>{_e(q)}</li>" for q in rubrics) + "</ol>")
    else:
        body.append('<p class="note">The task has no rubrics.</p>')

    body.append("<h2>Timings</h2>")
    if row.timings:
        rows = [[_e(k), fmt_num(v, 3)] for k, v in row.timings.items()]
        rows.append(["<b>total</b>", f"<b>{fmt_num(sum(row.timings.values()), 3)}</b>"])
        body.append(_table(["phase", "seconds"], rows, "timings", num=(1,)))
    if traj is not None and traj.timings:
        body.append(
            _table(
                ["inside the conversation", "seconds"],
                [[_e(k), fmt_num(v, 3)] for k, v in traj.timings.items()],
                "timings",
                num=(1,),
            )
        )
    if row.usage:
        rows = [
            [
                _e(role),
                _e(u.model or "—"),
                fmt_num(u.input_tokens),
                fmt_num(u.cached_tokens),
                fmt_num(u.output_tokens),
                fmt_usd(u.cost(a.run.prices, a.run.role_models.get(role))),
            ]
            for role, u in row.usage.items()
        ]
        body.append(
            _table(["role", "model", "input", "cached", "output", "cost"], rows, "usage", num=(2, 3, 4, 5))
        )
    return _page(f"tbx view: {row.task_id} #{row.repeat}", root, body)
