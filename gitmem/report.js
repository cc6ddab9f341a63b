
(function () {
  "use strict";
  // Everything shown comes from the memory (model-written, untrusted): it reaches the page only
  // through textContent and attribute values set from code, never as markup.
  var D = JSON.parse(document.getElementById("gitmem-data").textContent);
  var OPS = D.ops; // newest first
  var PATHS = D.paths;
  var SESSIONS = D.sessions;
  var SVGNS = document.getElementById("svg-namespace").namespaceURI;
  var STATUS = { A: "added", D: "deleted", M: "modified", R: "renamed" };
  var CHUNK = 200;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function when(t) { return t.slice(0, 19).replace("T", " "); }
  function colour(s) { return "hsl(" + Math.round((s * 137.508) % 360) + ", 60%, 42%)"; }
  function bytes(n) {
    if (n < 1024) return n + " B";
    if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
    return (n / 1048576).toFixed(1) + " MiB";
  }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  function opPaths(op) {
    var names = op.p.map(function (i) { return PATHS[i]; });
    return op.k === "rename" && names.length === 2 ? names[0] + " \u2192 " + names[1] : names.join(" ");
  }

  // -- file contents: each version is a change's diff applied to the version before it --------
  function splitLines(text) {
    var parts = text.split("\n"), out = [];
    for (var i = 0; i < parts.length - 1; i++) out.push(parts[i] + "\n");
    if (parts[parts.length - 1]) out.push(parts[parts.length - 1]);
    return out;
  }
  function applyDiff(text, diff) {
    if (!diff) return text;
    var old = splitLines(text), out = [], pos = 0, lines = diff.split("\n");
    for (var i = 0; i < lines.length; i++) {
      var line = lines[i], c = line.charAt(0);
      if (c === "@") {
        var m = /^@@ -(\d+)(?:,(\d+))? /.exec(line);
        var len = m[2] === undefined ? 1 : +m[2];
        var at = len === 0 ? +m[1] : +m[1] - 1;
        while (pos < at) out.push(old[pos++]);
      } else if (c === " ") {
        out.push(old[pos++]);
      } else if (c === "-") {
        pos++;
      } else if (c === "+") {
        var noEol = i + 1 < lines.length && lines[i + 1].charAt(0) === "\\";
        out.push(line.slice(1) + (noEol ? "" : "\n"));
      }
    }
    while (pos < old.length) out.push(old[pos++]);
    return out.join("");
  }
  var versionCache = new Map();
  function content(v) {
    if (v < 0) return null;
    var chain = [], cur = v, text = "";
    for (;;) {
      if (versionCache.has(cur)) { text = versionCache.get(cur); break; }
      var entry = D.versions[cur];
      if (typeof entry === "string") { text = entry; break; }
      chain.push(cur);
      cur = OPS[entry[0]].x[entry[1]][3];
      if (cur < 0) { text = ""; break; }
    }
    for (var i = chain.length - 1; i >= 0; i--) {
      var e = D.versions[chain[i]];
      text = applyDiff(text, OPS[e[0]].x[e[1]][7]);
      versionCache.set(chain[i], text);
    }
    return text;
  }

  // -- state, kept in the URL's fragment so that a view can be linked and reopened ------------
  var state = { view: "timeline", session: "", command: "", path: "", q: "", file: "" };
  function readHash() {
    var params = new URLSearchParams(location.hash.slice(1));
    for (var k in state) state[k] = params.has(k) ? params.get(k) : k === "view" ? "timeline" : "";
  }
  readHash();
  function writeHash() {
    var params = new URLSearchParams();
    for (var k in state) if (state[k] && !(k === "view" && state[k] === "timeline")) params.set(k, state[k]);
    var text = params.toString();
    history.replaceState(null, "", text ? "#" + text : location.pathname + location.search);
  }

  // -- the frame -------------------------------------------------------------------------------
  var app = document.getElementById("app");
  var header = el("header");
  header.appendChild(el("h1", null, "gitmem report"));
  var fileCount = 0;
  (function () {
    var seen = new Set();
    OPS.forEach(function (op) { op.x.forEach(function (c) { seen.add(c[1]); }); });
    fileCount = seen.size;
  })();
  header.appendChild(el("p", "meta",
    D.store + " \u00b7 " + D.range + " \u00b7 " + plural(OPS.length, "operation") + " by " +
    plural(SESSIONS.length, "session") + ", " + plural(fileCount, "file") + " \u00b7 generated " +
    when(D.generated) + " UTC by gitmem " + D.gitmem + " \u00b7 times in UTC"));
  var nav = el("nav");
  nav.setAttribute("role", "tablist");
  header.appendChild(nav);
  app.appendChild(header);
  var main = el("main");
  app.appendChild(main);
  var views = {}, rendered = {};
  [["timeline", "Timeline"], ["sessions", "Sessions"], ["files", "Files"], ["growth", "Growth"]].forEach(function (v) {
    var b = el("button", null, v[1]);
    b.id = "tab-" + v[0];
    b.setAttribute("role", "tab");
    b.addEventListener("click", function () { show(v[0]); });
    nav.appendChild(b);
    var section = el("section");
    section.id = v[0];
    section.hidden = true;
    main.appendChild(section);
    views[v[0]] = section;
  });
  function show(name) {
    if (!views[name]) name = "timeline";
    state.view = name;
    for (var k in views) {
      views[k].hidden = k !== name;
      document.getElementById("tab-" + k).setAttribute("aria-selected", String(k === name));
    }
    if (!rendered[name]) { rendered[name] = true; RENDER[name](views[name]); }
    writeHash();
  }

  // -- timeline ----------------------------------------------------------------------------------
  var haystacks = null;
  function haystack(i) {
    if (!haystacks) haystacks = new Array(OPS.length);
    var h = haystacks[i];
    if (h === undefined) {
      var op = OPS[i], parts = [opPaths(op)];
      op.x.forEach(function (c) {
        parts.push(PATHS[c[1]]);
        if (c[2] >= 0) parts.push(PATHS[c[2]]);
        parts.push(c[7]);
      });
      h = haystacks[i] = parts.join("\n").toLowerCase();
    }
    return h;
  }
  function touchesPath(op, needle) {
    for (var i = 0; i < op.p.length; i++) if (PATHS[op.p[i]].indexOf(needle) >= 0) return true;
    for (var j = 0; j < op.x.length; j++) {
      var c = op.x[j];
      if (PATHS[c[1]].indexOf(needle) >= 0 || (c[2] >= 0 && PATHS[c[2]].indexOf(needle) >= 0)) return true;
    }
    return false;
  }
  function matching() {
    var session = state.session ? SESSIONS.indexOf(state.session) : -1;
    var q = state.q.toLowerCase(), out = [];
    for (var i = 0; i < OPS.length; i++) {
      var op = OPS[i];
      if (state.session && op.s !== session) continue;
      if (state.command && op.k !== state.command) continue;
      if (state.path && !touchesPath(op, state.path)) continue;
      if (q && haystack(i).indexOf(q) < 0) continue;
      out.push(i);
    }
    return out;
  }
  function diffPre(diff) {
    var pre = el("pre", "diff");
    diff.split("\n").forEach(function (line) {
      var c = line.charAt(0);
      var cls = c === "+" ? "add" : c === "-" ? "del" : c === "@" ? "hunk" : c === "\\" ? "note" : "";
      pre.appendChild(el("span", cls, line));
    });
    return pre;
  }
  function opBody(op) {
    var body = el("div", "body");
    var id = el("div", "kv", "operation ");
    id.appendChild(el("code", null, op.c));
    body.appendChild(id);
    if (op.P.length > 1) {
      body.appendChild(el("div", "kv", "merge of " + op.P.map(function (p) { return p.slice(0, 10); }).join(" and ") +
        " (the diff is against the first parent)"));
    } else if (op.P.length === 1) {
      body.appendChild(el("div", "kv", "parent " + op.P[0].slice(0, 10)));
    }
    body.appendChild(el("div", "kv", "memory after it: " + plural(op.f, "file") + ", " + bytes(op.b)));
    if (op.d) body.appendChild(el("div", "kv", "detail " + JSON.stringify(op.d)));
    if (!op.x.length) body.appendChild(el("div", "kv", "no file changed"));
    op.x.forEach(function (c) {
      var box = el("div", "change");
      var name = c[2] >= 0 ? PATHS[c[2]] + " \u2192 " + PATHS[c[1]] : PATHS[c[1]];
      box.appendChild(el("div", "change-head", STATUS[c[0]] + " " + name + "  +" + c[5] + " \u2212" + c[6]));
      if (c[7]) box.appendChild(diffPre(c[7]));
      body.appendChild(box);
    });
    return body;
  }
  function opRow(i) {
    var op = OPS[i];
    var row = el("details", "op" + (op.P.length > 1 ? " merge" : ""));
    row.dataset.seq = op.n;
    row.style.borderLeftColor = colour(op.s);
    var head = el("summary");
    head.appendChild(el("span", "seq", "#" + op.n));
    head.appendChild(el("span", "time", when(op.t)));
    var who = el("span", "session", SESSIONS[op.s]);
    who.style.color = colour(op.s);
    head.appendChild(who);
    head.appendChild(el("span", "cmd cmd-" + op.k, op.k));
    if (op.P.length > 1) head.appendChild(el("span", "badge", "merge of " + op.P.length + " parents"));
    head.appendChild(el("span", "paths", opPaths(op)));
    var added = 0, removed = 0;
    op.x.forEach(function (c) { added += c[5]; removed += c[6]; });
    var stat = el("span", "stat");
    stat.appendChild(el("span", "a", "+" + added));
    stat.appendChild(document.createTextNode(" "));
    stat.appendChild(el("span", "r", "\u2212" + removed));
    head.appendChild(stat);
    row.appendChild(head);
    row.addEventListener("toggle", function () {
      if (row.open && row.childNodes.length === 1) row.appendChild(opBody(op));
    });
    return row;
  }
  var timeline = { list: null, count: null, sentinel: null, shown: [], next: 0, observer: null };
  function renderMore() {
    var frag = document.createDocumentFragment();
    var end = Math.min(timeline.next + CHUNK, timeline.shown.length);
    for (var k = timeline.next; k < end; k++) frag.appendChild(opRow(timeline.shown[k]));
    timeline.next = end;
    timeline.list.appendChild(frag);
    timeline.sentinel.hidden = timeline.next >= timeline.shown.length;
  }
  function refilter() {
    timeline.shown = matching();
    timeline.next = 0;
    timeline.list.textContent = "";
    timeline.count.textContent = (timeline.shown.length === OPS.length ? "all " : "") +
      timeline.shown.length + " of " + plural(OPS.length, "operation") + ", newest first";
    renderMore();
    writeHash();
  }
  function options(select, values, all) {
    select.appendChild(new Option(all, ""));
    values.forEach(function (v) { select.appendChild(new Option(v, v)); });
  }
  function field(label, input) {
    var l = el("label", null, label);
    l.appendChild(input);
    return l;
  }
  function renderTimeline(section) {
    var bar = el("div", "filters");
    var session = el("select");
    session.id = "filter-session";
    options(session, SESSIONS, "every session");
    var command = el("select");
    command.id = "filter-command";
    var commands = Array.from(new Set(OPS.map(function (op) { return op.k; }))).sort();
    options(command, commands, "every command");
    var path = el("input");
    path.id = "filter-path";
    path.placeholder = "/memories/...";
    var q = el("input");
    q.id = "filter-q";
    q.type = "search";
    q.placeholder = "text in paths and diffs";
    session.value = state.session;
    command.value = state.command;
    path.value = state.path;
    q.value = state.q;
    var clear = el("button", "plain", "Clear filters");
    bar.appendChild(field("Session", session));
    bar.appendChild(field("Command", command));
    bar.appendChild(field("Path contains", path));
    bar.appendChild(field("Search", q));
    bar.appendChild(clear);
    section.appendChild(bar);
    timeline.count = el("div", "count");
    timeline.count.id = "timeline-count";
    section.appendChild(timeline.count);
    timeline.list = el("div");
    timeline.list.id = "ops";
    section.appendChild(timeline.list);
    timeline.sentinel = el("button", "plain", "Show more");
    timeline.sentinel.addEventListener("click", renderMore);
    section.appendChild(timeline.sentinel);
    var timer = 0;
    function later() { clearTimeout(timer); timer = setTimeout(apply, 150); }
    function apply() {
      state.session = session.value;
      state.command = command.value;
      state.path = path.value;
      state.q = q.value;
      refilter();
    }
    session.addEventListener("change", apply);
    command.addEventListener("change", apply);
    path.addEventListener("input", later);
    q.addEventListener("input", later);
    clear.addEventListener("click", function () {
      session.value = command.value = path.value = q.value = "";
      apply();
    });
    timeline.apply = function () {
      session.value = state.session; command.value = state.command;
      path.value = state.path; q.value = state.q;
      refilter();
    };
    if ("IntersectionObserver" in window) {
      timeline.observer = new IntersectionObserver(function (entries) {
        if (entries[0].isIntersecting && timeline.next < timeline.shown.length) renderMore();
      }, { rootMargin: "600px" });
      timeline.observer.observe(timeline.sentinel);
    }
    refilter();
  }
  function filterTimeline(key, value) {
    state.session = state.command = state.path = state.q = "";
    state[key] = value;
    if (rendered.timeline) timeline.apply();
    show("timeline");
  }

  // -- sessions ----------------------------------------------------------------------------------
  function renderSessions(section) {
    section.appendChild(el("h2", null, plural(D.summaries.length, "session") + ", most recently active first"));
    var table = el("table");
    table.id = "sessions-table";
    var head = el("tr");
    ["Session", "First", "Last", "Operations", "By command", "Files"].forEach(function (t) {
      head.appendChild(el("th", null, t));
    });
    table.appendChild(head);
    D.summaries.forEach(function (s) {
      var index = SESSIONS.indexOf(s.session);
      var tr = el("tr");
      tr.dataset.session = s.session;
      var name = el("td");
      var sw = el("span", "swatch");
      sw.style.background = colour(index);
      name.appendChild(sw);
      var link = el("button", "linkish", s.session);
      link.title = "Show this session's operations";
      link.addEventListener("click", function () { filterTimeline("session", s.session); });
      name.appendChild(link);
      tr.appendChild(name);
      tr.appendChild(el("td", "time", when(s.first)));
      tr.appendChild(el("td", "time", when(s.last)));
      tr.appendChild(el("td", "num", s.operations));
      var cmds = el("td");
      Object.keys(s.commands).forEach(function (k) { cmds.appendChild(el("span", "chip", k + " " + s.commands[k])); });
      tr.appendChild(cmds);
      var files = el("td");
      s.paths.slice(0, 5).forEach(function (p) {
        var b = el("button", "linkish", p);
        b.addEventListener("click", function () { filterTimeline("path", p); });
        files.appendChild(b);
        files.appendChild(el("br"));
      });
      if (s.paths.length > 5) files.appendChild(el("span", "muted", "and " + (s.paths.length - 5) + " more"));
      tr.appendChild(files);
      table.appendChild(tr);
    });
    section.appendChild(table);
  }

  // -- files ---------------------------------------------------------------------------------------
  var fileIndex = null; // path id -> [[op index, change index], ...] newest first
  function buildFileIndex() {
    fileIndex = new Map();
    OPS.forEach(function (op, i) {
      op.x.forEach(function (c, j) {
        if (!fileIndex.has(c[1])) fileIndex.set(c[1], []);
        fileIndex.get(c[1]).push([i, j]);
        if (c[2] >= 0) {
          if (!fileIndex.has(c[2])) fileIndex.set(c[2], []);
          fileIndex.get(c[2]).push([i, j]);
        }
      });
    });
  }
  function renderFiles(section) {
    buildFileIndex();
    var ids = Array.from(fileIndex.keys()).sort(function (a, b) { return PATHS[a] < PATHS[b] ? -1 : 1; });
    var grid = el("div", "files");
    var left = el("div");
    var filter = el("input");
    filter.type = "search";
    filter.placeholder = "filter " + plural(ids.length, "file");
    left.appendChild(filter);
    var list = el("div", "file-list");
    list.id = "file-list";
    left.appendChild(list);
    var right = el("div");
    right.id = "file-detail";
    grid.appendChild(left);
    grid.appendChild(right);
    section.appendChild(grid);
    var buttons = new Map();
    function fill() {
      list.textContent = "";
      buttons.clear();
      var needle = filter.value, shown = 0;
      for (var k = 0; k < ids.length && shown < 1000; k++) {
        var id = ids[k];
        if (needle && PATHS[id].indexOf(needle) < 0) continue;
        var b = el("button", "linkish", PATHS[id] + " (" + fileIndex.get(id).length + ")");
        b.addEventListener("click", openFile.bind(null, id));
        if (PATHS[id] === state.file) b.classList.add("sel");
        buttons.set(id, b);
        list.appendChild(b);
        shown++;
      }
      if (shown === 1000) list.appendChild(el("div", "muted", "type to narrow the list"));
    }
    function openFile(id) {
      state.file = PATHS[id];
      buttons.forEach(function (b, k) { b.classList.toggle("sel", k === id); });
      writeHash();
      right.textContent = "";
      right.appendChild(el("h2", null, PATHS[id]));
      var entries = fileIndex.get(id);
      right.appendChild(el("div", "count", plural(entries.length, "change") + ", newest first; pick one to see the file after it"));
      var table = el("table");
      table.id = "file-history";
      var view = el("div");
      view.id = "file-content";
      entries.forEach(function (e, n) {
        var op = OPS[e[0]], c = op.x[e[1]];
        var status = STATUS[c[0]];
        if (c[0] === "R") status = c[1] === id ? "renamed from " + PATHS[c[2]] : "renamed to " + PATHS[c[1]];
        var tr = el("tr", "pick");
        tr.appendChild(el("td", "seq", "#" + op.n));
        tr.appendChild(el("td", "time", when(op.t)));
        var who = el("td", "session", SESSIONS[op.s]);
        who.style.color = colour(op.s);
        tr.appendChild(who);
        tr.appendChild(el("td", null, op.k));
        tr.appendChild(el("td", null, status + "  +" + c[5] + " \u2212" + c[6]));
        tr.addEventListener("click", function () {
          Array.prototype.forEach.call(table.rows, function (r) { r.classList.remove("sel"); });
          tr.classList.add("sel");
          showContent(view, op, c, id);
        });
        table.appendChild(tr);
        if (n === 0) { tr.classList.add("sel"); showContent(view, op, c, id); }
      });
      right.appendChild(table);
      right.appendChild(view);
    }
    function showContent(view, op, c, id) {
      view.textContent = "";
      var gone = c[4] < 0 || (c[0] === "R" && c[2] === id);
      var title = PATHS[id] + " after #" + op.n + " (" + when(op.t) + ")";
      view.appendChild(el("h2", null, title));
      if (gone) {
        view.appendChild(el("div", "muted", "not at this path after this operation"));
        return;
      }
      var text = content(c[4]);
      var pre = el("pre", "content");
      splitLines(text).forEach(function (line) { pre.appendChild(el("span", null, line.replace(/\n$/, ""))); });
      view.appendChild(pre);
    }
    filter.addEventListener("input", fill);
    fill();
    var wanted = PATHS.indexOf(state.file);
    if (wanted >= 0 && fileIndex.has(wanted)) openFile(wanted);
  }

  // -- growth ---------------------------------------------------------------------------------------
  function lineChart(title, values, format) {
    var W = 900, H = 220, L = 70, R = 16, T = 28, B = 34;
    var box = el("div", "chart");
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img" });
    s.appendChild(svg("title", {}, title));
    s.appendChild(svg("text", { x: L, y: 18, "font-size": 14, "font-weight": 600, fill: "#1f2328" }, title));
    var points = values.slice().sort(function (a, b) { return a[0] - b[0]; });
    var t0 = points.length ? points[0][0] : 0, t1 = points.length ? points[points.length - 1][0] : 1;
    if (t1 === t0) t1 = t0 + 1;
    var max = 1;
    points.forEach(function (p) { if (p[1] > max) max = p[1]; });
    function x(t) { return L + (t - t0) / (t1 - t0) * (W - L - R); }
    function y(v) { return H - B - v / max * (H - T - B); }
    s.appendChild(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#d0d7de" }));
    s.appendChild(svg("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#d0d7de" }));
    [0, Math.round(max / 2), max].forEach(function (v) {
      s.appendChild(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#656d76" }, format(v)));
      s.appendChild(svg("line", { x1: L, y1: y(v), x2: W - R, y2: y(v), stroke: "#eaeef2" }));
    });
    [t0, (t0 + t1) / 2, t1].forEach(function (t, k) {
      s.appendChild(svg("text", { x: x(t), y: H - 12, "font-size": 11, fill: "#656d76",
        "text-anchor": ["start", "middle", "end"][k] }, when(new Date(t).toISOString())));
    });
    var d = points.map(function (p, k) {
      var px = x(p[0]).toFixed(1), py = y(p[1]).toFixed(1);
      return k === 0 ? "M" + px + " " + py : "H" + px + " V" + py;
    });
    s.appendChild(svg("path", { d: d.join(" "), fill: "none", stroke: "#0969da", "stroke-width": 2 }));
    box.appendChild(s);
    return box;
  }
  function sessionBars() {
    var W = 900, H = 240, L = 50, R = 16, T = 28, B = 30;
    var box = el("div", "chart");
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img" });
    s.id = "session-bars";
    var title = "Operations per session, oldest session first";
    s.appendChild(svg("title", {}, title));
    s.appendChild(svg("text", { x: L, y: 18, "font-size": 14, "font-weight": 600, fill: "#1f2328" }, title));
    var list = D.summaries.slice().reverse();
    var max = 1;
    list.forEach(function (x) { if (x.operations > max) max = x.operations; });
    var step = (W - L - R) / Math.max(list.length, 1);
    s.appendChild(svg("text", { x: L - 6, y: T + 4, "text-anchor": "end", "font-size": 11, fill: "#656d76" }, max));
    s.appendChild(svg("text", { x: L - 6, y: H - B + 4, "text-anchor": "end", "font-size": 11, fill: "#656d76" }, 0));
    list.forEach(function (x, k) {
      var h = x.operations / max * (H - T - B);
      var bar = svg("rect", { x: (L + k * step + step * 0.1).toFixed(1), y: (H - B - h).toFixed(1),
        width: Math.max(step * 0.8, 0.5).toFixed(1), height: h.toFixed(1), fill: colour(SESSIONS.indexOf(x.session)) });
      bar.appendChild(svg("title", {}, x.session + ": " + plural(x.operations, "operation")));
      s.appendChild(bar);
      if (list.length <= 16) {
        s.appendChild(svg("text", { x: (L + (k + 0.5) * step).toFixed(1), y: H - 12, "text-anchor": "middle",
          "font-size": 11, fill: "#656d76" }, x.session.length > 18 ? x.session.slice(0, 17) + "\u2026" : x.session));
      }
    });
    box.appendChild(s);
    return box;
  }
  function renderGrowth(section) {
    section.appendChild(el("h2", null, "How the memory grew"));
    var files = [], size = [];
    OPS.forEach(function (op) {
      var t = Date.parse(op.t);
      files.push([t, op.f]);
      size.push([t, op.b]);
    });
    var a = lineChart("Files in the memory", files, String);
    a.firstChild.id = "growth-files";
    section.appendChild(a);
    var b = lineChart("Bytes of memory (file contents)", size, bytes);
    b.firstChild.id = "growth-bytes";
    section.appendChild(b);
    section.appendChild(sessionBars());
    section.appendChild(el("p", "legend", "Each line steps at every operation (in the order of their recorded times); " +
      "on a merged history the state shown is that of the branch each operation was on."));
  }

  var RENDER = { timeline: renderTimeline, sessions: renderSessions, files: renderFiles, growth: renderGrowth };
  if (!OPS.length) main.appendChild(el("p", "muted", "No operations in this range."));
  show(state.view);
  // A link to another view of this page (or back and forward) changes only the fragment.
  window.addEventListener("hashchange", function () {
    readHash();
    if (rendered.timeline) timeline.apply();
    if (rendered.files) { rendered.files = false; views.files.textContent = ""; }
    show(state.view);
  });
  window.__report = { content: content, applyDiff: applyDiff, show: show, filter: filterTimeline, state: state };
  window.__reportReadyMs = performance.now();
  window.__reportReady = true;
  document.documentElement.setAttribute("data-ready", "true");
})();
