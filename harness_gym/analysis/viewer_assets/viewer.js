/* harness-gym view: browse a run's episodes; open one beside its pair, steps aligned.
   The table is Tabulator's, the observation diff jsdiff's; this file only wires them to the
   run's data (data/index.js, data/t_NNN.js) and keeps the page's state in its address.
   Every string from the run's files is shown as text: this file builds DOM nodes with
   textContent (el, text) and hands Tabulator nodes, never HTML (it sets no innerHTML). */
(function () {
  "use strict";
  var HG = (window.HG = { data: null, chunks: {}, waiting: {}, table: null, byIndex: {} });

  HG.index = function (data) {
    HG.data = data;
    data.rows.forEach(function (r) { HG.byIndex[r.i] = r; });
  };
  HG.chunk = function (k, value) {
    HG.chunks[k] = value;
    (HG.waiting[k] || []).forEach(function (done) { done(); });
    delete HG.waiting[k];
  };
  // The trajectory of row i (null when it was not recorded).
  HG.load = function (i) {
    var k = HG.data.chunks[i];
    if (k === undefined) return Promise.resolve(null);
    if (HG.chunks[k]) return Promise.resolve(HG.chunks[k][i]);
    return new Promise(function (resolve) {
      (HG.waiting[k] = HG.waiting[k] || []).push(function () { resolve(HG.chunks[k][i]); });
      if (HG.waiting[k].length === 1) {
        var s = document.createElement("script");
        s.src = "data/t_" + String(k).padStart(4, "0") + ".js";
        document.head.appendChild(s);
      }
    });
  };

  function state() { return new URLSearchParams(location.hash.replace(/^#/, "")); }
  // A text node: what every Tabulator formatter here returns (Tabulator inserts a string as HTML).
  function text(value) {
    return document.createTextNode(value === null || value === undefined ? "" : String(value));
  }
  function asText(cell) { return text(cell.getValue()); }
  function titleText(cell) { return text(cell.getValue()); }
  function itemText(label) { return el("span", null, label); }
  // A screenshot's address: only the run's own screenshots/I/T.png, beside the page or, when
  // served (harness-gym view --serve), under run/.
  function screenshotSrc(path) {
    if (typeof path !== "string" || !/^screenshots\/\d+\/\d+\.png$/.test(path)) return null;
    return (location.protocol === "file:" ? HG.data.base : "run/") + path;
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // The partner of row r that differs in `factor` (or, without one, the first whose outcome
  // differs, else the first partner).
  function partnerOf(r, factor) {
    var mine = HG.data.harnesses[r.harness] || { neighbours: {} };
    var best = null;
    r.partners.forEach(function (j) {
      var p = HG.byIndex[j];
      var diff = mine.neighbours[p.harness] || [];
      if (factor) {
        if (diff.length === 1 && diff[0] === factor && best === null) best = p;
      } else if (best === null || (best.outcome === r.outcome && p.outcome !== r.outcome)) {
        best = p;
      }
    });
    return best;
  }
  function differsUnder(r, factor) {
    var p = partnerOf(r, factor);
    return p !== null && p.outcome !== r.outcome && p.outcome !== "error" && r.outcome !== "error";
  }

  // -- the episode list ----------------------------------------------------------------------
  function buildTable() {
    var d = HG.data;
    var list = { headerFilter: "list", headerFilterParams: { valuesLookup: true, clearable: true, itemFormatter: itemText }, headerFilterFunc: "=" };
    var columns = [
      { title: "#", field: "i", width: 60, sorter: "number" },
      Object.assign({ title: "agent", field: "agent" }, list),
      Object.assign({ title: "task", field: "task" }, list),
      Object.assign({ title: "harness", field: "harness", width: 90 }, list),
      Object.assign({ title: "seed", field: "seed", width: 70, sorter: "number" }, list),
      Object.assign({ title: "outcome", field: "outcome", width: 100 }, list),
      { title: "steps", field: "steps", width: 70, sorter: "number" },
      { title: "parse failures", field: "parse_failures", width: 90, sorter: "number" },
      Object.assign({ title: "recorded", field: "recorded", width: 90, formatter: "tickCross" },
        { headerFilter: "tickCross", headerFilterParams: { tristate: true }, headerFilterEmptyCheck: function (v) { return v === null || v === undefined || v === ""; } }),
    ];
    d.factors.forEach(function (f) {
      columns.push(Object.assign({ title: f, field: "L_" + f }, list));
    });
    columns.forEach(function (c) {
      c.titleFormatter = titleText;
      if (!c.formatter) c.formatter = asText;
    });
    HG.table = new Tabulator("#hg-table", {
      data: d.rows,
      columns: columns,
      nestedFieldSeparator: false, // a factor named "a.b" is one field, not a path
      layout: "fitDataStretch",
      maxHeight: "70vh",
      pagination: true,
      paginationSize: 50,
      rowFormatter: function (row) {
        var o = row.getData().outcome;
        row.getElement().classList.add(o === "success" ? "hg-success" : "hg-failure");
      },
    });
    HG.table.on("rowClick", function (e, row) { openEpisode(row.getData()); });
    HG.table.on("dataFiltered", function (filters, rows) {
      document.getElementById("hg-count").textContent = rows.length + " of " + d.rows.length + " episodes";
    });
    HG.table.on("tableBuilt", function () {
      HG.built = true;
      applyListState(state());
    });
    var sel = document.getElementById("hg-differs");
    d.factors.forEach(function (f) {
      var o = el("option", null, f);
      o.value = f;
      sel.appendChild(o);
    });
    sel.addEventListener("change", function () { setDiffers(sel.value); });
    document.getElementById("hg-clear").addEventListener("click", function () {
      HG.table.clearHeaderFilter();
      sel.value = "";
      setDiffers("");
    });
  }

  function setDiffers(factor) {
    HG.differs = factor || "";
    HG.table.removeFilter(differsFilter);
    if (factor) HG.table.addFilter(differsFilter);
  }
  function differsFilter(data) { return differsUnder(data, HG.differs); }

  var LIST_KEYS = { agent: "agent", task: "task", harness: "harness", seed: "seed", outcome: "outcome" };
  function applyListState(s) {
    if (!HG.built) return;
    HG.table.clearHeaderFilter();
    Object.keys(LIST_KEYS).forEach(function (k) {
      if (s.get(k)) HG.table.setHeaderFilterValue(LIST_KEYS[k], s.get(k));
    });
    if (s.get("factor") && s.get("level")) HG.table.setHeaderFilterValue("L_" + s.get("factor"), s.get("level"));
    if (s.get("recorded") === "1") HG.table.setHeaderFilterValue("recorded", true);
    var differs = s.get("differs") === "1" ? s.get("factor") || "" : "";
    document.getElementById("hg-differs").value = differs;
    setDiffers(differs);
  }

  function openEpisode(r) {
    var s = state();
    s.delete("ep");
    s.delete("vs");
    var p = partnerOf(r, HG.differs || s.get("factor"));
    var q = "ep=" + r.i + (p ? "&vs=" + p.i : "");
    var rest = s.toString();
    location.hash = q + (rest ? "&" + rest : "");
  }

  // -- the pair view -------------------------------------------------------------------------
  function meta(r, other) {
    var box = el("div", "hg-meta");
    var h = HG.data.harnesses[r.harness] || { levels: {} };
    var o = other ? (HG.data.harnesses[other.harness] || { levels: {} }) : null;
    box.appendChild(el("div", null, "#" + r.i + "  " + r.agent + " · " + r.task + " · seed " + r.seed));
    var line = el("div");
    line.appendChild(el("b", "hg-outcome", r.outcome));
    line.appendChild(document.createTextNode(" in " + r.steps + " steps, return " + r.ret + ", parse failures " + r.parse_failures + " · harness " + r.harness));
    box.appendChild(line);
    var lv = el("div");
    Object.keys(h.levels).forEach(function (f) {
      var changed = o && o.levels[f] !== h.levels[f];
      lv.appendChild(el("span", "hg-lv" + (changed ? " hg-changed" : ""), f + "=" + h.levels[f] + "  "));
    });
    box.appendChild(lv);
    return box;
  }

  function diffInto(pre, mine, theirs, side) {
    pre.textContent = "";
    if (theirs === null || theirs === undefined || typeof Diff === "undefined") {
      pre.textContent = mine || "";
      return;
    }
    Diff.diffLines(theirs || "", mine || "").forEach(function (part) {
      // From the other side to this one: what this side adds is marked, what it lacks is not shown.
      if (part.removed) return;
      pre.appendChild(part.added ? el(side === "left" ? "del" : "ins", null, part.value) : document.createTextNode(part.value));
    });
  }

  function key(step) { return step ? (step.parsed !== null && step.parsed !== undefined ? step.parsed : "!" + step.parse_status) : null; }

  function firstDivergence(a, b) {
    var n = Math.max(a.steps.length, b.steps.length);
    for (var t = 0; t < n; t++) {
      if (key(a.steps[t]) !== key(b.steps[t])) return t + 1;
    }
    return null;
  }

  function stepCell(step, other, side) {
    var cell = el("div", "hg-cell");
    if (!step) { cell.appendChild(el("span", "hg-none", "(episode over)")); return cell; }
    var pre = el("pre", "hg-obs");
    diffInto(pre, step.observation, other ? other.observation : null, side);
    cell.appendChild(pre);
    var src = screenshotSrc(step.screenshot);
    if (src) {
      var img = el("img");
      img.src = src;
      img.alt = "screenshot, step " + step.t;
      cell.appendChild(img);
    }
    if (step.messages) {
      var det = el("details");
      det.appendChild(el("summary", null, "chat messages (" + step.messages.length + ")"));
      var m = el("pre");
      m.textContent = step.messages.map(function (x) { return "[" + x.role + "] " + (typeof x.content === "string" ? x.content : JSON.stringify(x.content)); }).join("\n\n");
      det.appendChild(m);
      cell.appendChild(det);
    }
    var reply = el("div", "hg-act");
    reply.appendChild(el("b", null, "reply: "));
    reply.appendChild(document.createTextNode(step.reply));
    cell.appendChild(reply);
    var parsed = el("div", "hg-act");
    var ok = step.parse_status === "ok";
    parsed.appendChild(el("b", null, "parsed: "));
    parsed.appendChild(el("span", ok ? "hg-status-ok" : "hg-status-bad", ok ? step.parsed || "(ok)" : step.parse_status + ": " + (step.error || "")));
    if (ok && step.error) parsed.appendChild(el("span", "hg-status-bad", "  refused: " + step.error));
    cell.appendChild(parsed);
    var info = "reward " + step.reward + (step.truncated ? " · truncated" : "") + (step.terminated ? " · terminated" : "");
    if (step.completion_tokens !== undefined && step.completion_tokens !== null) info += " · tokens " + step.prompt_tokens + "+" + step.completion_tokens;
    if (step.latency) info += " · " + step.latency.toFixed(2) + " s";
    if (step.state_digest) info += " · state " + step.state_digest;
    cell.appendChild(el("div", "hg-act", info));
    return cell;
  }

  function renderPair(s) {
    var r = HG.byIndex[Number(s.get("ep"))];
    if (!r) return false;
    var vsIndex = s.get("vs") !== null ? Number(s.get("vs")) : null;
    var p = vsIndex !== null ? HG.byIndex[vsIndex] : null;
    document.getElementById("hg-list").hidden = true;
    document.getElementById("hg-pair").hidden = false;
    var back = new URLSearchParams(s.toString());
    back.delete("ep");
    back.delete("vs");
    document.getElementById("hg-back").href = "#" + back.toString();
    var sel = document.getElementById("hg-vs");
    sel.textContent = "";
    var mine = HG.data.harnesses[r.harness] || { neighbours: {}, levels: {} };
    HG.data.rows.forEach(function (o) {
      if (o.agent !== r.agent || o.task !== r.task || o.seed !== r.seed || o.i === r.i) return;
      var other = HG.data.harnesses[o.harness] || { levels: {} };
      var changed = Object.keys(mine.levels).filter(function (f) { return mine.levels[f] !== other.levels[f]; });
      var opt = el("option", null, o.harness + " (" + o.outcome + (o.recorded ? "" : ", not recorded") + "): " + changed.map(function (f) { return f + "=" + other.levels[f]; }).join(", "));
      opt.value = o.i;
      if (p && o.i === p.i) opt.selected = true;
      sel.appendChild(opt);
    });
    sel.onchange = function () {
      var n = new URLSearchParams(s.toString());
      n.set("vs", sel.value);
      location.hash = n.toString();
    };
    var lh = document.getElementById("hg-left-head"), rh = document.getElementById("hg-right-head");
    lh.textContent = "";
    rh.textContent = "";
    lh.appendChild(meta(r, p));
    if (p) rh.appendChild(meta(p, r));
    var steps = document.getElementById("hg-steps");
    steps.textContent = "loading…";
    Promise.all([HG.load(r.i), p ? HG.load(p.i) : Promise.resolve(null)]).then(function (both) {
      var a = both[0], b = both[1];
      steps.textContent = "";
      var banner = document.getElementById("hg-diverge");
      banner.textContent = "";
      if (!a) { steps.appendChild(el("p", "hg-none", "episode #" + r.i + " was not recorded (sweep with --trajectories all to keep every one)")); return; }
      if (p && !b) banner.textContent = "episode #" + p.i + " was not recorded: only the left side is shown";
      diffInto(document.getElementById("hg-sys-left"), a.system_prompt, b ? b.system_prompt : null, "left");
      diffInto(document.getElementById("hg-sys-right"), b ? b.system_prompt : "", a.system_prompt, "right");
      var div = b ? firstDivergence(a, b) : null;
      if (b) banner.textContent = div ? "first diverging step: t = " + div + " (the parsed actions differ)" : "the parsed actions never diverge";
      var n = Math.max(a.steps.length, b ? b.steps.length : 0);
      for (var t = 0; t < n; t++) {
        var row = el("div", "hg-step" + (div === t + 1 ? " hg-diverge" : ""));
        row.id = "step-" + (t + 1);
        row.appendChild(el("div", "hg-t", "t=" + (t + 1)));
        row.appendChild(stepCell(a.steps[t], b ? b.steps[t] : null, "left"));
        row.appendChild(b ? stepCell(b.steps[t], a.steps[t], "right") : el("div"));
        steps.appendChild(row);
      }
      if (div) document.getElementById("step-" + div).scrollIntoView({ block: "center" });
    });
    return true;
  }

  function render() {
    var s = state();
    if (s.get("ep") !== null && renderPair(s)) return;
    document.getElementById("hg-pair").hidden = true;
    document.getElementById("hg-list").hidden = false;
    if (HG.built) {
      HG.table.redraw();
      applyListState(s);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var d = HG.data;
    if (!d) {
      document.getElementById("hg-summary").textContent = "no data/index.js: run `harness-gym view RUN_DIR` again";
      return;
    }
    document.title = "harness-gym view: " + d.run;
    document.getElementById("hg-title").textContent = "harness-gym view: " + d.run;
    var recorded = d.rows.filter(function (r) { return r.recorded; }).length;
    document.getElementById("hg-summary").textContent =
      "sweep " + d.sweep_id + " · " + d.rows.length + " episodes, " + recorded + " with recorded trajectories · factors: " + d.factors.join(", ");
    buildTable();
    window.addEventListener("hashchange", render);
    render();
  });
})();
