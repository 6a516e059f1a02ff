"""The site's stylesheet and the tasks page's script, written as local files
(assets/view.css, assets/tasks.js): every page works from file:// with no
network. The tasks page's data is a third local script (data/tasks.js)
setting `window.TBX_TASKS`, because browsers refuse fetch() on file:// but
run a <script src>.

tasks.js keeps the page state (filters, sort, page) in the URL fragment, so a
filtered view is a link: `index.html#sig=tool_use&status=flaky&q=ST002`.
"""

from __future__ import annotations

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:20px 24px;color:#222;
  font-size:14px;line-height:1.4}
a{color:#2a5db0;text-decoration:none}a:hover{text-decoration:underline}
h1{font-size:1.45em;margin:.2em 0 .4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd;
  padding-bottom:3px}h3{font-size:1em;margin:1.1em 0 .3em}
nav.crumbs{font-size:.9em;color:#666;margin-bottom:6px}nav.crumbs a{margin-right:4px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:.92em}
th,td{border:1px solid #d4d4d4;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3;white-space:nowrap}td.num,th.num{text-align:right;white-space:nowrap}
th.sort{cursor:pointer;user-select:none}th.sort:hover{background:#e6e6e6}
.note{color:#555;font-size:.9em}.muted{color:#888}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
pre{background:#f6f6f6;border:1px solid #e2e2e2;padding:6px 8px;margin:4px 0;white-space:pre-wrap;
  word-break:break-word;max-height:420px;overflow:auto}
.pass{color:#1f7a35;font-weight:600}.fail{color:#b3261e;font-weight:600}.err{color:#8a6d00;font-weight:600}
.marks{white-space:nowrap;font-size:0}.marks a,.marks span{display:inline-block;width:9px;height:16px;
  margin-right:2px;border-radius:2px;vertical-align:middle}
.m-p{background:#3a9a4f}.m-f{background:#d6453d}.m-e{background:#c9a227}.m-n{background:#e4e4e4}
.kk{font-size:.85em;color:#444;margin-left:6px;vertical-align:middle}
.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin:8px 0;padding:8px;
  background:#fafafa;border:1px solid #e4e4e4}
.filters label{font-size:.9em;color:#444}.filters input[type=search]{width:240px}
.pager{margin:6px 0;font-size:.9em}.pager button{margin:0 3px}
.sig{display:inline-block;padding:0 5px;border-radius:3px;font-size:.85em;background:#eee}
.sig-tool_use{background:#f6c9c6}.sig-wrong_state_update{background:#fbd9b5}
.sig-incomplete_resolution{background:#f7eab0}.sig-no_state_change{background:#c7e6e3}
.sig-rubric_failed{background:#e3cfe0}
.msg{border:1px solid #ddd;border-radius:5px;margin:8px 0;padding:6px 9px;max-width:1100px}
.msg .who{font-size:.8em;font-weight:600;color:#555;text-transform:uppercase;letter-spacing:.03em}
.msg.user{background:#f2f6fc;border-color:#cddbf0}.msg.assistant{background:#fff}
.msg.tool{background:#fbfbfb;margin-left:28px}.msg.tool.error{background:#fdeceb;border-color:#e8a6a1}
.msg.error-box{background:#fdeceb;border-color:#e8a6a1}
.msg .text{white-space:pre-wrap;word-break:break-word}
.call{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;font-weight:600}
.badge{display:inline-block;font-size:.75em;padding:0 5px;border-radius:3px;background:#b3261e;color:#fff;
  margin-left:6px;vertical-align:middle}
.badge.hint{background:#5b4a9e}
tr.hl td{background:#fff6d6}tr.hl td.expected,td.expected{background:#e3f4e7}tr.hl td.got,td.got{background:#fbe3e1}
.diffrow{margin:6px 0 12px}.what{font-weight:600}
details>summary{cursor:pointer;color:#2a5db0}
.grid{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}
#tasks td:nth-last-child(-n+2),table.attempts td:last-child{max-width:460px;overflow-wrap:anywhere}
table.fields td,table.row td{max-width:620px;overflow-wrap:anywhere}
"""

TASKS_JS = r"""
(function () {
  "use strict";
  var D = window.TBX_TASKS;
  var PAGE = 100;
  var STATUS = {
    "": "any",
    sometimes: "passed sometimes (at least once)",
    never: "never passed",
    flaky: "flaky (some, not all)",
    always: "always passed"
  };
  var MARK = {p: "pass", f: "fail", e: "system error", n: "not run"};

  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function readHash() {
    var st = {domain: "", sig: "", status: "", q: "", sort: "id", page: 1};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return;
      var i = kv.indexOf("="), k = decodeURIComponent(i < 0 ? kv : kv.slice(0, i));
      var v = i < 0 ? "" : decodeURIComponent(kv.slice(i + 1).replace(/\+/g, " "));
      if (k in st) st[k] = k === "page" ? Math.max(1, parseInt(v, 10) || 1) : v;
    });
    return st;
  }
  function writeHash(st) {
    var parts = [];
    ["domain", "sig", "status", "q", "sort", "page"].forEach(function (k) {
      var v = st[k];
      if (v === "" || (k === "sort" && v === "id") || (k === "page" && v === 1)) return;
      parts.push(k + "=" + encodeURIComponent(v));
    });
    var h = parts.length ? "#" + parts.join("&") : "";
    if (h !== location.hash) history.replaceState(null, "", h || location.pathname);
  }
  function statusOf(t) {
    var out = {};
    if (t.p > 0) out.sometimes = true;
    if (t.n > 0 && t.p === 0) out.never = true;
    if (t.n > 0 && t.p === t.n) out.always = true;
    if (t.flaky) out.flaky = true;
    return out;
  }
  function keep(t, st) {
    if (st.domain && t.d !== st.domain) return false;
    if (st.sig && !(st.sig in t.sc)) return false;
    if (st.status && !statusOf(t)[st.status]) return false;
    if (st.q && t.id.toLowerCase().indexOf(st.q.toLowerCase()) < 0) return false;
    return true;
  }
  var SORTS = {
    id: function (t) { return t.id; },
    domain: function (t) { return t.d + "\u0000" + t.id; },
    rate: function (t, r) {
      var x = r === undefined ? t : t.runs[r];
      return x && x.n ? x.p / x.n : -1;
    },
    sig: function (t) { return (t.s || "\uffff") + "\u0000" + t.id; },
    diff: function (t) { return (t.diff || "\uffff") + "\u0000" + t.id; }
  };
  function sorted(list, sort) {
    // "rate" sorts by the pass rate over every run, "rate:1" by run 1's
    var desc = sort.charAt(0) === "-", name = desc ? sort.slice(1) : sort, parts = name.split(":");
    var key = SORTS[parts[0]] || SORTS.id, run = parts.length > 1 ? parseInt(parts[1], 10) : undefined;
    var out = list.slice();
    out.sort(function (a, b) {
      var x = key(a, run), y = key(b, run), c = x < y ? -1 : x > y ? 1 : 0;
      if (c === 0) c = a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
      return desc ? -c : c;
    });
    return out;
  }
  function marks(run, r) {
    var html = "";
    for (var i = 0; i < run.m.length; i++) {
      var c = run.m.charAt(i), a = run.a[i], title = "repeat " + i + ": " + MARK[c];
      if (run.g[i]) title += " [" + run.g[i] + "]";
      html += a
        ? '<a class="m-' + c + '" data-mark="' + c + '" href="' + esc(a) + '" title="' + esc(title) + '"></a>'
        : '<span class="m-' + c + '" data-mark="' + c + '" title="' + esc(title) + '"></span>';
    }
    return '<span class="marks" data-run="' + r + '">' + html + '</span><span class="kk">' +
      run.p + "/" + run.n + (run.e ? " +" + run.e + " err" : "") + "</span>";
  }
  function row(t) {
    var cells = [
      '<td><a class="task" href="' + esc(t.href) + '">' + esc(t.id) + "</a></td>",
      "<td>" + esc(t.d) + "</td>"
    ];
    t.runs.forEach(function (run, r) { cells.push("<td>" + marks(run, r) + "</td>"); });
    var others = Object.keys(t.sc).length - (t.s ? 1 : 0);
    cells.push("<td>" + (t.s ? '<span class="sig sig-' + esc(t.s) + '">' + esc(t.s) + "</span> \u00d7" +
      t.sc[t.s] + (others > 0 ? ' <span class="muted">+' + others + " other</span>" : "") : "") + "</td>");
    cells.push("<td>" + (t.diff ? esc(t.diff) + ' <span class="muted">\u00d7' + t.dc + "</span>" : "") +
      "</td>");
    return '<tr data-task="' + esc(t.id) + '" data-passes="' + t.p + '" data-valid="' + t.n + '">' +
      cells.join("") + "</tr>";
  }
  function option(value, text, current) {
    return '<option value="' + esc(value) + '"' + (value === current ? " selected" : "") + ">" +
      esc(text) + "</option>";
  }
  function controls(st) {
    var dom = option("", "all", st.domain), sig = option("", "any", st.sig), stat = "";
    D.domains.forEach(function (d) { dom += option(d, d, st.domain); });
    D.signatures.forEach(function (s) { sig += option(s, s, st.sig); });
    Object.keys(STATUS).forEach(function (k) { stat += option(k, STATUS[k], st.status); });
    document.getElementById("filters").innerHTML =
      '<label>domain <select id="f-domain">' + dom + "</select></label>" +
      '<label>signature <select id="f-sig">' + sig + "</select></label>" +
      '<label>status <select id="f-status">' + stat + "</select></label>" +
      '<label>task id <input type="search" id="f-q" placeholder="search" value="' + esc(st.q) + '"></label>' +
      '<span id="count" class="note"></span>';
    ["domain", "sig", "status"].forEach(function (k) {
      document.getElementById("f-" + k).addEventListener("change", function (ev) {
        var s = readHash(); s[k] = ev.target.value; s.page = 1; writeHash(s); render();
      });
    });
    document.getElementById("f-q").addEventListener("input", function (ev) {
      var s = readHash(); s.q = ev.target.value; s.page = 1; writeHash(s); render();
    });
  }
  function header(st) {
    var cols = [["id", "task"], ["domain", "domain"]];
    D.runs.forEach(function (r, i) {
      cols.push([D.runs.length > 1 ? "rate:" + i : "rate", r.label + " (K=" + r.k + ")"]);
    });
    cols.push(["sig", "most common signature"], ["diff", "most common difference"]);
    return "<tr>" + cols.map(function (c) {
      var arrow = st.sort === c[0] ? " \u25b2" : st.sort === "-" + c[0] ? " \u25bc" : "";
      return '<th class="sort" data-sort="' + c[0] + '">' + esc(c[1]) + arrow + "</th>";
    }).join("") + "</tr>";
  }
  function render() {
    var st = readHash();
    var list = sorted(D.tasks.filter(function (t) { return keep(t, st); }), st.sort);
    var pages = Math.max(1, Math.ceil(list.length / PAGE));
    if (st.page > pages) st.page = pages;
    var start = (st.page - 1) * PAGE, shown = list.slice(start, start + PAGE);
    var table = document.getElementById("tasks");
    table.tHead.innerHTML = header(st);
    table.tBodies[0].innerHTML = shown.map(row).join("");
    document.getElementById("count").textContent = list.length + " of " + D.tasks.length + " tasks";
    var pager = document.getElementById("pager");
    pager.innerHTML = pages < 2 ? "" :
      '<button id="prev"' + (st.page < 2 ? " disabled" : "") + ">\u2190 previous</button>" +
      "page " + st.page + " of " + pages + " (tasks " + (start + 1) + "\u2013" + (start + shown.length) + ")" +
      '<button id="next"' + (st.page >= pages ? " disabled" : "") + ">next \u2192</button>";
    [["prev", -1], ["next", 1]].forEach(function (b) {
      var el = document.getElementById(b[0]);
      if (el) el.addEventListener("click", function () {
        var s = readHash(); s.page = st.page + b[1]; writeHash(s); render();
      });
    });
    Array.prototype.forEach.call(table.tHead.querySelectorAll("th.sort"), function (th) {
      th.addEventListener("click", function () {
        var s = readHash(), k = th.getAttribute("data-sort");
        s.sort = s.sort === k ? "-" + k : k; s.page = 1; writeHash(s); render();
      });
    });
    document.body.setAttribute("data-rendered", String(shown.length));
  }
  controls(readHash());
  render();
  window.addEventListener("hashchange", function () { controls(readHash()); render(); });
})();
"""
