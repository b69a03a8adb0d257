// twinscope report: builds what the page draws from the embedded join (#ts-data): the launch table
// (rows added as it scrolls), kernel time per step (Chart.js where it was inlined), and for the selected
// launch the block heatmap and the arrival-order plot, drawn by hand on canvases (and, for a serving run,
// the chosen request's steps with links to its launches' block pictures): Chart.js took ~1.7 s
// for a 65,536-point scatter, these take tens of milliseconds. Block detail is inflated and decoded
// only for the launch shown (format: src/views/report/block_codec.h). Everything from the trace reaches the
// page through textContent or attributes set as properties, never as markup.
// For tests and the benchmark: window.tsReady (a promise of the first render's timings),
// window.tsSelftest() (draws every detailed launch once and renders every table row), data-drawn on
// each canvas and data-ready on <body>.
(() => {
  "use strict";
  const T0 = performance.now();
  const timings = { script_start: Math.round(T0) };
  const mark = (k) => { timings[k] = Math.round(performance.now() - T0); };
  const data = JSON.parse(document.getElementById("ts-data").textContent);
  const rep = data.report || {};
  const detail = rep.detail || [];
  const hasChart = typeof window.Chart === "function";
  const byId = new Map();
  (data.launches || []).forEach((l) => byId.set(l.id, l));
  const detailIndex = new Map();
  detail.forEach((m, i) => detailIndex.set(m.launch, i));
  const groupOf = new Map();  // launch id -> {group, slow entry or null}
  (data.why_slow || []).forEach((g) => {
    if (g.reference !== undefined) groupOf.set(g.reference, { group: g, slow: null });
    (g.slow || []).forEach((s) => groupOf.set(s.launch, { group: g, slow: s }));
  });
  const C = { accent: "#2f6db5", other: "#c3cad4", straggler: "#d62728", grid: "#e9ebee", axis: "#9aa1a9",
              text: "#3a3f45", dim: "#6a727c", tail: "rgba(214, 39, 40, 0.07)", band: "#f5f6f8" };
  const FONT = "11px system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif";
  mark("parse");

  // ---- formatting (the C++ side's Duration and Count) -----------------------------------------------
  const DASH = "\u2013";
  function fmtNs(ns) {
    if (ns === null || ns === undefined || !isFinite(ns)) return DASH;
    const a = Math.abs(ns);
    const f = (v, u) => v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2) + " " + u;
    if (a < 1e3) return Math.round(ns) + " ns";
    if (a < 1e6) return f(ns / 1e3, "\u00b5s");
    if (a < 1e9) return f(ns / 1e6, "ms");
    return f(ns / 1e9, "s");
  }
  const fmtCount = (v) => (v === null || v === undefined ? DASH : Number(v).toLocaleString("en-US"));
  const pct = (part, whole) => (whole && part !== undefined ? (100 * part / whole).toFixed(1) + "%" : DASH);
  const dims = (v) => (Array.isArray(v) ? "(" + v.join(",") + ")" : DASH);
  function unitFor(maxNs) {
    if (maxNs >= 1e9) return { div: 1e9, name: "s" };
    if (maxNs >= 1e6) return { div: 1e6, name: "ms" };
    if (maxNs >= 1e3) return { div: 1e3, name: "\u00b5s" };
    return { div: 1, name: "ns" };
  }
  // A kernel name as the tables show it: report::ShortKernelName (src/views/report/fields.cpp) in the page.
  function shortName(name, max) {
    name = String(name === undefined || name === null ? "" : name);
    max = max || 64;
    const bytes = (t) => new TextEncoder().encode(t).length;
    if (bytes(name) <= max) return name;
    let out = "", balanced = true;
    for (let i = 0; i < name.length && balanced; i++) {
      const c = name[i];
      if (c !== "<" && c !== "(") { out += c; continue; }
      if (out.endsWith("operator")) { out += c; continue; }
      if (name.startsWith("(anonymous namespace)", i)) { out += "(anonymous namespace)"; i += 20; continue; }
      const close = c === "<" ? ">" : ")";
      let j = i, depth = 0;
      for (; j < name.length; j++) {
        if (name[j] === c) depth++;
        if (name[j] === close && --depth === 0) break;
      }
      if (j >= name.length) { balanced = false; break; }
      out += c + (j > i + 1 ? "..." : "") + close;
      i = j;
    }
    if (!balanced) out = name;
    if (bytes(out) <= max) return out;
    const half = Math.floor(max / 2) - 1, chars = Array.from(out);
    if (chars.length <= 2 * half) return out;
    return chars.slice(0, half).join("") + "\u2026" + chars.slice(chars.length - half).join("");
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function record(e) {
    if (window.tsRecordError) window.tsRecordError("report: " + (e && e.stack ? e.stack : e));
  }
  // ---- kernel time per step (Chart.js bar chart where it was inlined, else drawStepsByHand) -------------
  function drawSteps() {
    const canvas = document.getElementById("ts-steps");
    if (!canvas) return;
    const steps = data.steps || [];
    if (!hasChart) { drawStepsByHand(canvas, steps); return; }
    let max = 0;
    steps.forEach((s) => { max = Math.max(max, s.kernel_ns || 0); });
    const u = unitFor(max);
    new Chart(canvas, {
      type: "bar",
      data: {
        labels: steps.map((s) => s.range),
        datasets: [
          { label: "target kernels", data: steps.map((s) => (s.target_ns || 0) / u.div), backgroundColor: C.accent,
            stack: "k" },
          { label: "other kernels", stack: "k", backgroundColor: C.other,
            data: steps.map((s) => Math.max(0, (s.kernel_ns || 0) - (s.target_ns || 0)) / u.div) }]
      },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        datasets: { bar: { categoryPercentage: 1.0, barPercentage: steps.length > 100 ? 1.0 : 0.85 } },
        scales: {
          x: { stacked: true, title: { display: true, text: "top-level NVTX range instance (primary)", color: C.dim },
               ticks: { autoSkip: true, maxRotation: 0, color: C.text }, grid: { display: false } },
          y: { stacked: true, beginAtZero: true, ticks: { color: C.text }, grid: { color: C.grid },
               title: { display: true, text: "GPU kernel time (" + u.name + ", CUPTI)", color: C.dim } }
        },
        plugins: {
          legend: { position: "top", align: "end", labels: { boxWidth: 12 } },
          tooltip: { callbacks: {
            label: (c) => c.dataset.label + ": " + fmtNs(c.raw * u.div),
            footer: (items) => {
              const s = steps[items[0].dataIndex];
              return fmtCount(s.kernels) + " kernels" + (s.steps ? " in " + s.steps + " ranges" : "");
            } } }
        }
      }
    });
    canvas.setAttribute("data-drawn", String(steps.length));
    canvas.setAttribute("data-renderer", "chartjs");
  }

  // The same stacked bars on the page's own canvas code (a build without Chart.js): target kernels, then
  // the others, a y axis in the unit of the tallest bar, a legend; hovering a bar names it in a tooltip.
  function drawStepsByHand(canvas, steps) {
    const wrap = canvas.parentElement;
    const cssW = Math.max(320, wrap.clientWidth), cssH = Math.max(160, wrap.clientHeight || 260);
    const ctx = setupCanvas(canvas, cssW, cssH);
    const M = { l: 64, r: 12, t: 26, b: 40 }, plotW = cssW - M.l - M.r, plotH = cssH - M.t - M.b;
    let max = 0;
    steps.forEach((s) => { max = Math.max(max, s.kernel_ns || 0); });
    const u = unitFor(max), ticks = niceTicks(max / u.div, plotH, 40), top = Math.max(ticks[ticks.length - 1], 1e-9);
    const y = (v) => M.t + plotH - v / u.div / top * plotH;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    ticks.forEach((v) => {
      const ty = Math.round(M.t + plotH - v / top * plotH) + 0.5;
      ctx.strokeStyle = C.grid;
      ctx.beginPath(); ctx.moveTo(M.l, ty); ctx.lineTo(M.l + plotW, ty); ctx.stroke();
      ctx.fillStyle = C.text;
      ctx.fillText(String(Number(v.toPrecision(6))), M.l - 6, ty);
    });
    yTitle(ctx, M, plotH, "GPU kernel time (" + u.name + ", CUPTI)");
    const slot = plotW / Math.max(steps.length, 1), barW = Math.max(1, slot * (steps.length > 100 ? 1.0 : 0.85));
    steps.forEach((s, i) => {
      const x = M.l + i * slot + (slot - barW) / 2, total = s.kernel_ns || 0, target = Math.min(s.target_ns || 0, total);
      ctx.fillStyle = C.accent;
      ctx.fillRect(x, y(target), barW, M.t + plotH - y(target));
      ctx.fillStyle = C.other;
      ctx.fillRect(x, y(total), barW, y(target) - y(total));
    });
    ctx.strokeStyle = C.axis;
    ctx.beginPath(); ctx.moveTo(M.l + 0.5, M.t); ctx.lineTo(M.l + 0.5, M.t + plotH + 0.5);
    ctx.lineTo(M.l + plotW, M.t + plotH + 0.5); ctx.stroke();
    ctx.fillStyle = C.dim;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    ctx.fillText("top-level NVTX range instance (primary)", M.l + plotW / 2, M.t + plotH + 22);
    if (steps.length) {  // first and last range under the axis
      ctx.fillStyle = C.text;
      ctx.textAlign = "left";
      ctx.fillText(String(steps[0].range), M.l, M.t + plotH + 6);
      ctx.textAlign = "right";
      if (steps.length > 1) ctx.fillText(String(steps[steps.length - 1].range), M.l + plotW, M.t + plotH + 6);
    }
    let lx = M.l + plotW;
    [["other kernels", C.other], ["target kernels", C.accent]].forEach(([text, color]) => {
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillStyle = C.text;
      ctx.fillText(text, lx, 10);
      lx -= ctx.measureText(text).width + 6;
      ctx.fillStyle = color;
      ctx.fillRect(lx - 12, 4, 12, 12);
      lx -= 24;
    });
    canvas.addEventListener("mousemove", (e) => {
      const r = canvas.getBoundingClientRect(), i = Math.floor((e.clientX - r.left - M.l) / slot);
      const s = steps[i];
      canvas.title = !s ? "" : s.range + ": target kernels " + fmtNs(s.target_ns || 0) + ", other kernels " +
        fmtNs(Math.max(0, (s.kernel_ns || 0) - (s.target_ns || 0))) + "; " + fmtCount(s.kernels) + " kernels" +
        (s.steps ? " in " + s.steps + " ranges" : "");
    });
    canvas.setAttribute("data-drawn", String(steps.length));
    canvas.setAttribute("data-renderer", "canvas");
  }

  // ---- the launch table: slowest first, rows added as the reader scrolls ------------------------------
  function launchLink(id) {
    if (!detailIndex.has(id)) {
      const s = el("span", "", "#" + id);
      s.title = "no block detail for this launch in the report";
      return s;
    }
    const a = el("a", "ts-show", "#" + id);
    a.href = "#blocks";
    a.setAttribute("data-launch", String(id));
    return a;
  }
  function badge(cls, text) { return el("span", "badge " + cls, text); }
  // A shape in the table: "4096" for (4096,1,1), "64x8" for (64,8,1).
  const shape = (v) => {
    if (!Array.isArray(v)) return DASH;
    let n = v.length;
    while (n > 1 && v[n - 1] === 1) n--;
    return v.slice(0, n).join("\u00d7");
  };
  const COLUMNS = [
    ["rank", "num", (l, r) => String(r + 1)],
    ["launch", "", (l) => launchLink(l.id)],
    ["kernel", "kernel", (l) => { const s = el("span", "clip", shortName(l.kernel)); s.title = l.kernel || ""; return s; }],
    ["match", "", (l) => {
      const f = document.createDocumentFragment();
      f.appendChild(l.match === "exact" ? badge("m-exact", "exact") : badge("m-time", l.match === "time" ? "time only" : String(l.match)));
      if (l.shape_differs) f.appendChild(badge("m-shape", "shape differs"));
      if ((l.primary || {}).overlapped) f.appendChild(badge("m-overlap", "overlapped"));
      if (l.ambiguous) f.appendChild(badge("m-shape", "ambiguous"));
      if ((l.primary || {}).have_kernel === false) f.appendChild(badge("m-overlap", "no kernel record"));
      if ((l.primary || {}).graph) f.appendChild(badge("m-graph", "graph"));
      return f;
    }],
    ["key path \u00b7 ordinal", "path", (l) => {
      const k = l.key || {}, p = (k.path || "") + " \u00b7 " + (k.ordinal ?? DASH), s = el("span", "clip", p);
      s.title = "launch key: range path " + (k.path || "") + ", ordinal " + (k.ordinal ?? DASH) + " within its innermost range instance";
      return s;
    }],
    ["start", "num", (l) => fmtNs((l.primary || {}).start_ns)],
    ["duration", "num strong", (l) => fmtNs((l.primary || {}).dur_ns)],
    ["stream", "num", (l) => String((l.primary || {}).stream ?? DASH)],
    ["grid\u00d7block", "", (l) => {
      const p = l.primary || {}, s = el("span", "", shape(p.grid) + " \u00b7 " + shape(p.block));
      s.title = "grid " + dims(p.grid) + ", block " + dims(p.block);
      return s;
    }],
    ["blocks", "num sh", (l) => fmtCount((l.shadow || {}).blocks_seen) + "/" + fmtCount((l.shadow || {}).blocks_expected)],
    ["working", "num sh", (l) => fmtCount((l.shadow || {}).blocks_working)],
    ["SMs", "num sh", (l) => fmtCount((l.shadow || {}).sms_used)],
    ["per SM", "num sh", (l) => { const b = (l.shadow || {}).blocks_per_sm; return b ? b.join("/") : DASH; }],
    ["tau", "num sh", (l) => { const t = (l.shadow || {}).kendall_tau; return typeof t === "number" ? t.toFixed(3) : DASH; }],
    ["straggler", "sh", (l) => { const s = (l.shadow || {}).straggler; return s ? fmtCount(s.block) + " @ SM " + s.sm : DASH; }],
    ["tail*", "num sh", (l) => { const s = l.shadow || {}; return fmtNs(s.tail_ns) + (s.span_ns ? "  " + pct(s.tail_ns, s.span_ns) : ""); }],
    ["span*", "num sh", (l) => fmtNs((l.shadow || {}).span_ns)]];
  const TITLES = { "grid\u00d7block": "grid and block shape (primary)", working: "blocks that ran at least a quarter of the reference's median block time",
                   "per SM": "blocks per SM: min/median/max", tau: "Kendall tau of arrival order against block index (1 = in order)",
                   "tail*": "last exit minus median exit, and its share of the span (shadow clock)", "span*": "first entry to last exit (shadow clock)" };
  let table = null;
  function buildTable() {
    const wrap = document.getElementById("ts-launch-table");
    if (!wrap) return;
    const rows = (data.launches || []).slice(0, rep.launch_rows || 0);
    const status = document.getElementById("ts-launch-status");
    const t = el("table", "launches");
    const cg = el("colgroup");
    COLUMNS.forEach(() => cg.appendChild(el("col")));
    t.appendChild(cg);
    const hr = t.createTHead().insertRow();
    COLUMNS.forEach((c) => {
      const th = el("th", c[1].replace("strong", "").replace("kernel", "").replace("path", ""), c[0]);
      if (TITLES[c[0]]) th.title = TITLES[c[0]];
      hr.appendChild(th);
    });
    const body = t.createTBody();
    let shown = 0;
    function more(k) {
      const end = Math.min(rows.length, shown + k);
      const frag = document.createDocumentFragment();
      for (let r = shown; r < end; r++) {
        const l = rows[r], tr = el("tr", groupOf.has(l.id) ? "hl" : "");
        COLUMNS.forEach((c) => {
          const td = el("td", c[1]);
          const v = c[2](l, r);
          if (typeof v === "string") td.textContent = v; else td.appendChild(v);
          tr.appendChild(td);
        });
        frag.appendChild(tr);
      }
      body.appendChild(frag);
      shown = end;
      wrap.setAttribute("data-rows", String(shown));
      if (status) status.textContent = shown < rows.length ? "Showing " + fmtCount(shown) + " of " + fmtCount(rows.length) +
        " rows; more appear as you scroll the table." : fmtCount(rows.length) + " rows.";
    }
    wrap.appendChild(t);
    more(100);
    // Columns sized by the first rows, then fixed: later rows neither move them nor cost a relayout of all.
    let width = 0;
    Array.from(hr.cells).forEach((th, i) => {
      const w = Math.ceil(th.getBoundingClientRect().width);
      cg.children[i].style.width = w + "px";
      width += w;
    });
    t.style.width = width + "px";
    t.style.tableLayout = "fixed";
    wrap.addEventListener("scroll", () => {
      if (shown < rows.length && wrap.scrollTop + wrap.clientHeight > wrap.scrollHeight - 600) more(200);
    }, { passive: true });
    table = { all: () => more(rows.length), rows: () => shown };
  }

  // ---- requests (a serving run): the chosen request's steps and links to its launches' block pictures ----
  const reqs = data.requests || null;
  function showRequest(i) {
    const box = document.getElementById("ts-request-detail");
    const rows = (reqs && reqs.rows) || [];
    if (!box || i < 0 || i >= rows.length) return;
    const r = rows[i];
    const sel = document.getElementById("ts-request-select");
    if (sel) sel.value = String(i);
    box.textContent = "";
    const stepsBy = showRequest.steps || (showRequest.steps = new Map((reqs.steps || []).map((s) => [s.step, s])));
    const ms = (us) => (typeof us === "number" ? fmtNs(us * 1000) : DASH);
    const head = el("p", "facts-head");
    head.appendChild(el("strong", "", "Request " + r.id));
    head.append(" \u00b7 status " + r.status + (r.finish_reason ? " (" + r.finish_reason + ")" : "") + " \u00b7 prompt " +
      fmtCount(r.prompt_tokens) + " tokens, reply " + fmtCount(r.completion_tokens) + " \u00b7 first token " +
      ms(r.first_token_us) + ", done " + ms(r.done_us) + " after arrival (server clock)");
    box.appendChild(head);
    if (r.error) box.appendChild(el("p", "warn", r.error));
    box.appendChild(el("p", "", (r.steps || []).length + " steps (" + r.prefill_steps + " prefill, " + r.decode_steps +
      " decode); the primary's kernel time in them " + fmtNs(r.kernel_ns) + " (its share " + fmtNs(r.kernel_share_ns) +
      "), target kernel " + fmtNs(r.target_ns) + " in " + fmtCount(r.target_launches) + " launches, matched in the shadow " +
      fmtCount(r.shadow_exact) + " exactly (" + pct(r.shadow_exact, r.target_launches) + ")" +
      (r.shadow_time_only ? ", " + fmtCount(r.shadow_time_only) + " by time only" : "") + "; on the GPU from " +
      fmtNs(r.gpu_start_ns) + " to " + fmtNs(r.gpu_end_ns) + "."));
    // Block pictures: its target launches that have block detail in this report.
    const pics = el("p", "ts-req-pictures");
    let links = 0, missing = 0;
    pics.appendChild(el("strong", "", "Block pictures of its target launches: "));
    (r.steps || []).forEach((st) => {
      const s = stepsBy.get(st);
      if (!s) { missing++; return; }
      (s.target_launches || []).forEach((t) => {
        if (t[2] >= 0 && detailIndex.has(t[2])) {
          if (links) pics.append(", ");
          pics.appendChild(launchLink(t[2]));
          pics.append(" (step " + s.step + ")");
          links++;
        }
      });
    });
    if (!links) pics.append("none of them has block detail in this report (" + detail.length + " launches do; " +
      "twinscope export DIR --format perfetto draws every matched launch's blocks)");
    box.appendChild(pics);
    // Its steps.
    const t = el("table", "requests-steps");
    const hr = t.createTHead().insertRow();
    ["step", "kind", "batch (padded)", "GPU start", "kernel time", "target kernel", "target launches: launch, duration"]
      .forEach((c, k) => hr.appendChild(el("th", k >= 3 && k <= 5 ? "num" : "", c)));
    const body = t.createTBody();
    const MAX_ROWS = 500;
    (r.steps || []).slice(0, MAX_ROWS).forEach((st) => {
      const s = stepsBy.get(st), tr = body.insertRow();
      tr.appendChild(el("td", "num", String(st)));
      if (!s) {
        const td = el("td", "dim", "not in this report's bounded copy");
        td.colSpan = 6;
        tr.appendChild(td);
        return;
      }
      tr.appendChild(el("td", "", s.kind || DASH));
      const has = (v) => v !== null && v !== undefined;
      tr.appendChild(el("td", "num", fmtCount(s.batch) + (s.kind === "prefill" && has(s.tokens) ? " (" + fmtCount(s.tokens) +
        " tokens)" : has(s.padded) ? " (" + s.padded + ")" : "")));
      tr.appendChild(el("td", "num", fmtNs(s.start_ns)));
      tr.appendChild(el("td", "num", fmtNs(s.kernel_ns)));
      tr.appendChild(el("td", "num", fmtNs(s.target_ns)));
      const td = el("td", "targets");
      (s.target_launches || []).forEach((x, k) => {
        if (k) td.append(" ");
        if (x[2] >= 0) td.appendChild(launchLink(x[2])); else td.appendChild(el("span", "warn", "unmatched"));
        td.append(" " + fmtNs(x[1]));
      });
      if (!(s.target_launches || []).length) td.textContent = DASH;
      tr.appendChild(td);
    });
    const wrap = el("div", "table-wrap short");
    wrap.appendChild(t);
    box.appendChild(wrap);
    if ((r.steps || []).length > MAX_ROWS)
      box.appendChild(el("p", "note", "The first " + MAX_ROWS + " of its " + r.steps.length + " steps."));
    box.setAttribute("data-request", r.id);
    box.setAttribute("data-steps", String(Math.min((r.steps || []).length, MAX_ROWS)));
    box.setAttribute("data-links", String(links));
    box.setAttribute("data-missing-steps", String(missing));
  }
  function buildRequests() {
    const sel = document.getElementById("ts-request-select");
    if (!reqs || !sel) return;
    sel.addEventListener("change", () => { try { showRequest(Number(sel.value)); } catch (e) { record(e); } });
    document.addEventListener("click", (e) => {
      const a = e.target.closest && e.target.closest("a.ts-req");
      if (a) showRequest(Number(a.getAttribute("data-request")));
    });
    // The request shown first: #request=ID in the URL, else the first.
    const m = /request=([^&]+)/.exec(location.hash);
    const want = m ? decodeURIComponent(m[1]) : null;
    const i = want !== null ? (reqs.rows || []).findIndex((r) => r.id === want) : -1;
    showRequest(i >= 0 ? i : 0);
  }

  // ---- block detail: inflate and decode one launch -----------------------------------------------------
  async function bytesOf(meta) {
    let bin;
    try {
      bin = atob(document.getElementById(meta.element).textContent.trim());
    } catch (e) {
      throw new Error("block data of launch #" + meta.launch + " is not base64 (damaged file?): " + e);
    }
    const u8 = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) u8[i] = bin.charCodeAt(i);
    if (meta.codec === "raw") return u8;
    if (meta.codec !== "deflate") throw new Error("block data of launch #" + meta.launch + ": unknown codec " + meta.codec);
    if (typeof DecompressionStream !== "function")
      throw new Error("this browser cannot inflate the block data (it lacks DecompressionStream, which Chrome 80+, " +
                      "Firefox 113+ and Safari 16.4+ have)");
    try {
      const stream = new Blob([u8]).stream().pipeThrough(new DecompressionStream("deflate"));
      return new Uint8Array(await new Response(stream).arrayBuffer());
    } catch (e) {
      throw new Error("block data of launch #" + meta.launch + " cannot be inflated (damaged file?): " + e);
    }
  }

  const decoded = new Map();
  async function decode(i) {
    if (decoded.has(i)) return decoded.get(i);
    const meta = detail[i], bytes = await bytesOf(meta), n = meta.count, len = bytes.length;
    let p = 0;
    const varint = () => {
      let v = 0, mul = 1, b;
      do {
        if (p >= len) throw new Error("block data of launch #" + meta.launch + " ends early");
        b = bytes[p++];
        v += (b & 127) * mul;
        mul *= 128;
      } while (b & 128);
      return v;
    };
    const signed = () => { const v = varint(); return v % 2 ? -(v + 1) / 2 : v / 2; };
    const d = { n, meta, block: new Float64Array(n), sm: new Int32Array(n), enter: new Float64Array(n),
                exit: new Float64Array(n), order: new Float64Array(n) };
    let acc = -1;
    for (let k = 0; k < n; k++) {
      if (meta.order_implicit) acc = k; else acc += signed() + 1;
      d.order[k] = acc;
    }
    acc = -1;
    for (let k = 0; k < n; k++) { acc += signed() + 1; d.block[k] = acc; }
    for (let k = 0; k < n; k++) d.sm[k] = varint();
    acc = 0;
    const unit = meta.unit_ns;
    for (let k = 0; k < n; k++) { acc += signed(); d.enter[k] = acc * unit; }  // ns from the first entry
    for (let k = 0; k < n; k++) d.exit[k] = d.enter[k] + signed() * unit;
    if (p !== len) throw new Error("block data of launch #" + meta.launch + " has " + (len - p) + " bytes left over");
    let maxSm = 0, maxBlock = 0, maxExit = 0, maxOrder = 0;
    const sums = { block: 0, sm: 0, order: 0 };
    for (let k = 0; k < n; k++) {
      if (d.sm[k] > maxSm) maxSm = d.sm[k];
      if (d.block[k] > maxBlock) maxBlock = d.block[k];
      if (d.exit[k] > maxExit) maxExit = d.exit[k];
      if (d.order[k] > maxOrder) maxOrder = d.order[k];
      sums.block += d.block[k]; sums.sm += d.sm[k]; sums.order += d.order[k];
    }
    const st = ((byId.get(meta.launch) || {}).shadow || {}).straggler;
    d.straggler = -1;
    if (st && st.block !== undefined) for (let k = 0; k < n; k++) if (d.block[k] === st.block) { d.straggler = k; break; }
    const exits = Float64Array.from(d.exit).sort();
    d.medianExit = n ? exits[(n - 1) >> 1] : 0;
    Object.assign(d, { maxSm, maxBlock, maxExit, maxOrder, sums });
    layoutLanes(d);
    if (decoded.size >= 4) decoded.delete(decoded.keys().next().value);
    decoded.set(i, d);
    return d;
  }

  // Concurrent blocks of one SM get separate lanes (greedy, in entry order), so none hides another.
  function layoutLanes(d) {
    // Blocks come in arrival order, which is entry order up to clock skew between SMs: an insertion
    // sort is linear on that; a general sort takes over if the entries are far from sorted.
    const idx = new Uint32Array(d.n), e = d.enter;
    let moves = 0;
    for (let k = 0; k < d.n; k++) {
      let j = k;
      while (j > 0 && e[idx[j - 1]] > e[k] && moves < 8 * d.n) { idx[j] = idx[j - 1]; j--; moves++; }
      idx[j] = k;
    }
    if (moves >= 8 * d.n) {
      for (let k = 0; k < d.n; k++) idx[k] = k;
      idx.sort((a, b) => e[a] - e[b]);
    }
    const laneEnds = [], perSm = [];
    d.lane = new Uint16Array(d.n);
    d.lanes = 1;
    for (let k = 0; k < d.n; k++) {
      const i = idx[k], sm = d.sm[i], ends = laneEnds[sm] || (laneEnds[sm] = []);
      let lane = 0;
      while (lane < ends.length && ends[lane] > d.enter[i]) lane++;
      if (lane > 1023) lane = 1023;
      ends[lane] = Math.max(ends[lane] || 0, d.exit[i]);
      d.lane[i] = lane;
      if (lane + 1 > d.lanes) d.lanes = lane + 1;
      (perSm[sm] || (perSm[sm] = [])).push(i);
    }
    d.perSm = perSm;
  }

  // ---- canvas helpers --------------------------------------------------------------------------------
  function setupCanvas(canvas, cssW, cssH) {
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = cssW + "px";
    canvas.style.height = cssH + "px";
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    ctx.font = FONT;
    return ctx;
  }
  function niceTicks(max, px, minGap) {
    const target = Math.max(2, Math.floor(px / minGap));
    const raw = Math.max(max, 1e-9) / target, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    const step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p, out = [];
    for (let i = 0; i * step <= max * 1.0001; i++) out.push(i * step);
    return out;
  }
  // A horizontal axis under the plot: ticks, labels, title.
  function xAxis(ctx, M, plotW, plotH, max, label, title) {
    ctx.strokeStyle = C.axis;
    ctx.fillStyle = C.text;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    niceTicks(max, plotW, 90).forEach((v) => {
      const x = Math.round(M.l + v / Math.max(max, 1e-9) * plotW) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, M.t + plotH); ctx.lineTo(x, M.t + plotH + 4); ctx.stroke();
      ctx.fillText(label(v), x, M.t + plotH + 6);
    });
    ctx.fillStyle = C.dim;
    ctx.fillText(title, M.l + plotW / 2, M.t + plotH + 24);
  }
  function yTitle(ctx, M, plotH, title) {
    ctx.save();
    ctx.translate(13, M.t + plotH / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillStyle = C.dim;
    ctx.fillText(title, 0, 0);
    ctx.restore();
  }
  function labelBox(ctx, text, x, y, color) {
    const w = ctx.measureText(text).width;
    ctx.fillStyle = "rgba(255,255,255,0.88)";
    ctx.fillRect(x - 3, y - 8, w + 6, 16);
    ctx.fillStyle = color;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    ctx.fillText(text, x, y);
    return w;
  }

  // ---- block heatmap: one row per SM, time across, a bar per block --------------------------------------
  const VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"];
  const PALETTE = (() => {
    const hex = (c) => [1, 3, 5].map((o) => parseInt(c.substr(o, 2), 16));
    const stops = VIRIDIS.map(hex), out = [];
    for (let b = 0; b < 64; b++) {
      const t = b / 63 * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(t)), f = t - i;
      out.push("rgb(" + [0, 1, 2].map((j) => Math.round(stops[i][j] + (stops[i + 1][j] - stops[i][j]) * f)).join(",") + ")");
    }
    return out;
  })();

  function drawHeatmap(canvas, d, smRows) {
    const shadow = (byId.get(d.meta.launch) || {}).shadow || {};
    const cssW = Math.max(520, canvas.parentElement.clientWidth);
    const rowH = Math.max(3, Math.min(14, Math.floor(560 / smRows)));
    const M = { l: 58, r: 18, t: 30, b: 44 };
    const plotW = cssW - M.l - M.r, plotH = smRows * rowH;
    const ctx = setupCanvas(canvas, cssW, plotH + M.t + M.b);
    const tmax = Math.max(d.maxExit, 1), xs = plotW / tmax, laneH = rowH / d.lanes;
    const X = (t) => M.l + t * xs;

    ctx.fillStyle = C.band;  // every other SM row, so rows can be followed across
    for (let s = 0; s < smRows; s += 2) ctx.fillRect(M.l, M.t + s * rowH, plotW, rowH);
    ctx.fillStyle = C.tail;  // the tail: median exit to last exit
    ctx.fillRect(X(d.medianExit), M.t, X(d.maxExit) - X(d.medianExit), plotH);

    // Blocks, one fill colour (a block-index bucket) at a time.
    const buckets = Array.from({ length: 64 }, () => []);
    const bscale = d.maxBlock > 0 ? 63 / d.maxBlock : 0;
    for (let k = 0; k < d.n; k++) buckets[Math.round(d.block[k] * bscale)].push(k);
    const minW = 1 / (window.devicePixelRatio || 1);
    buckets.forEach((list, b) => {
      ctx.fillStyle = PALETTE[b];
      for (const k of list)
        ctx.fillRect(X(d.enter[k]), M.t + d.sm[k] * rowH + d.lane[k] * laneH,
                     Math.max(minW, (d.exit[k] - d.enter[k]) * xs), Math.max(minW, laneH));
    });

    // Median exit, frame, axes.
    ctx.strokeStyle = "rgba(214, 39, 40, 0.55)";
    ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(Math.round(X(d.medianExit)) + 0.5, M.t); ctx.lineTo(Math.round(X(d.medianExit)) + 0.5, M.t + plotH); ctx.stroke();
    ctx.setLineDash([]);
    ctx.strokeStyle = C.axis;
    ctx.strokeRect(M.l - 0.5, M.t - 0.5, plotW + 1, plotH + 1);
    const u = unitFor(tmax);
    const rounded = d.meta.unit_ns > 1 ? ", times rounded to " + fmtNs(d.meta.unit_ns) : "";
    xAxis(ctx, M, plotW, plotH, tmax, (v) => +(v / u.div).toPrecision(6) + " " + u.name,
          "time since the launch's first block entry (shadow clock, stretched by the probe" + rounded + ")");
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    ctx.fillStyle = C.text;
    let every = Math.ceil(14 / rowH);
    every = every <= 1 ? 1 : every <= 2 ? 2 : every <= 5 ? 5 : every <= 10 ? 10 : 20;
    for (let s = 0; s < smRows; s += every) ctx.fillText(String(s), M.l - 6, M.t + s * rowH + rowH / 2);
    yTitle(ctx, M, plotH, "SM");

    // Legend: the block-index colour scale, top right.
    ctx.textBaseline = "middle";
    const maxText = fmtCount(d.maxBlock), maxW = ctx.measureText(maxText).width;
    const lw = 150, lx = M.l + plotW - lw - maxW - 6, ly = 9;
    PALETTE.forEach((c, b) => { ctx.fillStyle = c; ctx.fillRect(lx + b * lw / 64, ly, lw / 64 + 0.5, 10); });
    ctx.fillStyle = C.text;
    ctx.textAlign = "right";
    ctx.fillText("block index 0", lx - 5, ly + 5);
    ctx.textAlign = "left";
    ctx.fillText(maxText, lx + lw + 5, ly + 5);

    // Tail and straggler, labelled.
    const tailNs = shadow.tail_ns ?? d.maxExit - d.medianExit, spanNs = shadow.span_ns ?? d.maxExit;
    const tailText = "tail " + fmtNs(tailNs) + " (" + pct(tailNs, spanNs) + " of the span), from the median exit";
    ctx.font = "bold " + FONT;
    const tw = ctx.measureText(tailText).width;
    labelBox(ctx, tailText, Math.max(M.l, Math.min(X(d.medianExit) + 4, lx - 120 - tw)), ly + 5, C.straggler);
    if (d.straggler >= 0) {
      const k = d.straggler;
      const sx = X(d.enter[k]), sy = M.t + d.sm[k] * rowH, sw = Math.max(2, (d.exit[k] - d.enter[k]) * xs);
      ctx.fillStyle = C.straggler;
      ctx.fillRect(sx, sy, sw, rowH);
      ctx.strokeStyle = "#000";
      ctx.strokeRect(sx - 0.5, sy - 0.5, sw + 1, rowH + 1);
      const label = "straggler: block " + fmtCount(d.block[k]) + " on SM " + d.sm[k];
      const w = ctx.measureText(label).width;
      // Right of the bar, else left of it, else inside it.
      const lx2 = sx + sw + 8 + w <= M.l + plotW ? sx + sw + 8 : sx - 8 - w >= M.l ? sx - 8 - w : sx + 6;
      labelBox(ctx, label, lx2, sy + rowH / 2, C.straggler);
    }
    ctx.font = FONT;
    canvas.tsHit = { kind: "heat", d, M, rowH, laneH, xs, smRows };
    canvas.setAttribute("data-drawn", String(d.n));
    canvas.setAttribute("data-launch", String(d.meta.launch));
    canvas.setAttribute("data-sum-block", String(d.sums.block));
    canvas.setAttribute("data-sum-sm", String(d.sums.sm));
    canvas.setAttribute("data-sum-order", String(d.sums.order));
    canvas.setAttribute("data-straggler", d.straggler >= 0 ? String(d.block[d.straggler]) : "");
  }

  // ---- arrival order: block index across, arrival up --------------------------------------------------
  function drawOrder(canvas, d) {
    const cssW = Math.max(480, Math.min(980, canvas.parentElement.clientWidth)), cssH = 340;
    const M = { l: 70, r: 20, t: 26, b: 44 };
    const plotW = cssW - M.l - M.r, plotH = cssH - M.t - M.b;
    const ctx = setupCanvas(canvas, cssW, cssH);
    const bx = Math.max(d.maxBlock, 1), oy = Math.max(d.maxOrder, 1);
    const X = (b) => M.l + b / bx * plotW, Y = (o) => M.t + plotH - o / oy * plotH;
    ctx.strokeStyle = C.grid;
    niceTicks(oy, plotH, 40).forEach((v) => {
      const y = Math.round(Y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(M.l, y); ctx.lineTo(M.l + plotW, y); ctx.stroke();
      ctx.fillStyle = C.text; ctx.textAlign = "right"; ctx.textBaseline = "middle";
      ctx.fillText(fmtCount(v), M.l - 6, y);
    });
    ctx.strokeStyle = C.axis;
    ctx.setLineDash([4, 4]);
    ctx.beginPath(); ctx.moveTo(X(0), Y(0)); ctx.lineTo(X(bx), Y(oy)); ctx.stroke();
    ctx.setLineDash([]);
    const s = d.n > 20000 ? 1.2 : d.n > 2000 ? 2 : 3;
    ctx.fillStyle = "rgba(47, 109, 181, 0.6)";
    for (let k = 0; k < d.n; k++) ctx.fillRect(X(d.block[k]) - s / 2, Y(d.order[k]) - s / 2, s, s);
    ctx.strokeStyle = C.axis;
    ctx.strokeRect(M.l - 0.5, M.t - 0.5, plotW + 1, plotH + 1);
    xAxis(ctx, M, plotW, plotH, bx, fmtCount, "block index (linear)");
    yTitle(ctx, M, plotH, "arrival order (0 = first to enter)");
    // Legend.
    ctx.textBaseline = "middle";
    ctx.textAlign = "left";
    let lx = M.l + plotW - 250;
    ctx.fillStyle = "rgba(47, 109, 181, 0.8)"; ctx.fillRect(lx, 9, 8, 8);
    ctx.fillStyle = C.text; ctx.fillText("blocks", lx + 12, 13); lx += 62;
    ctx.strokeStyle = C.axis; ctx.setLineDash([4, 4]); ctx.beginPath(); ctx.moveTo(lx, 13); ctx.lineTo(lx + 18, 13); ctx.stroke(); ctx.setLineDash([]);
    ctx.fillText("in order", lx + 22, 13); lx += 82;
    diamond(ctx, lx + 4, 13, 5);
    ctx.fillStyle = C.text; ctx.fillText("straggler", lx + 12, 13);
    if (d.straggler >= 0) {
      const k = d.straggler, x = X(d.block[k]), y = Y(d.order[k]);
      diamond(ctx, x, y, 6);
      const label = "block " + fmtCount(d.block[k]) + ", arrived " + fmtCount(d.order[k]);
      ctx.font = "bold " + FONT;
      const w = ctx.measureText(label).width;
      labelBox(ctx, label, x + 10 + w <= M.l + plotW ? x + 10 : Math.max(M.l + 4, x - 10 - w), y, C.straggler);
      ctx.font = FONT;
    }
    canvas.tsHit = { kind: "order", d, M, plotW, bx };
    canvas.setAttribute("data-drawn", String(d.n));
  }
  function diamond(ctx, x, y, r) {
    ctx.fillStyle = C.straggler;
    ctx.strokeStyle = "#000";
    ctx.beginPath(); ctx.moveTo(x, y - r); ctx.lineTo(x + r, y); ctx.lineTo(x, y + r); ctx.lineTo(x - r, y); ctx.closePath();
    ctx.fill(); ctx.stroke();
  }

  // Hover: the block under the pointer.
  function hitHeat(h, x, y) {
    const sm = Math.floor((y - h.M.t) / h.rowH), t = (x - h.M.l) / h.xs;
    const list = sm >= 0 && sm < h.smRows ? h.d.perSm[sm] : null;
    if (!list) return -1;
    const lane = Math.floor((y - h.M.t - sm * h.rowH) / h.laneH), slack = 3 / h.xs;
    for (const k of list)
      if (t >= h.d.enter[k] - slack && t <= h.d.exit[k] + slack && (h.d.lanes === 1 || h.d.lane[k] === lane)) return k;
    return -1;
  }
  function hitOrder(h, x) {
    const d = h.d;
    if (!d.byBlock) {
      d.byBlock = new Int32Array(d.maxBlock + 1).fill(-1);
      for (let k = 0; k < d.n; k++) d.byBlock[d.block[k]] = k;
    }
    const b = Math.round((x - h.M.l) / h.plotW * h.bx);
    return b >= 0 && b <= d.maxBlock ? d.byBlock[b] : -1;
  }
  function attachTip(canvas) {
    const tip = canvas.parentElement.querySelector(".tip");
    canvas.addEventListener("mousemove", (e) => {
      const h = canvas.tsHit;
      if (!h || !tip) return;
      const r = canvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
      const k = h.kind === "heat" ? hitHeat(h, x, y) : hitOrder(h, x);
      if (k < 0) { tip.hidden = true; return; }
      const d = h.d;
      tip.textContent = "block " + fmtCount(d.block[k]) + " \u00b7 SM " + d.sm[k] + " \u00b7 entered " + fmtNs(d.enter[k]) +
        ", left " + fmtNs(d.exit[k]) + " (" + fmtNs(d.exit[k] - d.enter[k]) + ") \u00b7 arrival " + fmtCount(d.order[k]) +
        (k === d.straggler ? " \u00b7 straggler" : "");
      tip.hidden = false;
      tip.style.left = Math.max(0, Math.min(x + 12, r.width - tip.offsetWidth - 4)) + "px";
      tip.style.top = (y + 14) + "px";
    });
    canvas.addEventListener("mouseleave", () => { if (tip) tip.hidden = true; });
  }

  // ---- facts: the selected launch beside its shape's reference --------------------------------------------
  function facts(id, refId) {
    const box = document.getElementById("ts-facts");
    box.textContent = "";
    const l = byId.get(id), r = refId !== null ? byId.get(refId) : null, g = groupOf.get(id);
    const head = el("p", "facts-head");
    head.appendChild(el("strong", "", "Launch #" + id));
    if (l) {
      const k = el("code", "kernel", shortName(l.kernel));
      k.title = l.kernel || "";
      head.append(" ", k);
    } else {
      head.append(" (not among the report's launches)");
    }
    box.appendChild(head);
    if (g && g.slow && g.slow.text) box.appendChild(el("p", "verdict", g.slow.text));
    if (g && !g.slow) box.appendChild(el("p", "verdict", "The reference launch of its shape: the launch of median primary duration."));
    const sh = (x) => (x && x.shadow) || {}, pr = (x) => (x && x.primary) || {};
    const rows = [
      ["primary duration", (x) => fmtNs(pr(x).dur_ns)],
      ["match", (x) => (x.match === "time" ? "time only" : x.match) + (x.shape_differs ? ", shape differs" : "")],
      ["key path / ordinal", (x) => ((x.key || {}).path || "") + " / " + ((x.key || {}).ordinal ?? DASH)],
      ["blocks seen / expected", (x) => fmtCount(sh(x).blocks_seen) + " / " + fmtCount(sh(x).blocks_expected)],
      ["working blocks", (x) => fmtCount(sh(x).blocks_working)],
      ["SMs used", (x) => fmtCount(sh(x).sms_used)],
      ["blocks per SM (min / median / max)", (x) => (sh(x).blocks_per_sm ? sh(x).blocks_per_sm.join(" / ") : DASH)],
      ["order inversions", (x) => fmtCount(sh(x).inversions)],
      ["Kendall tau (1 = in order)", (x) => (typeof sh(x).kendall_tau === "number" ? sh(x).kendall_tau.toFixed(3) : DASH)],
      ["straggler", (x) => (sh(x).straggler ? "block " + fmtCount(sh(x).straggler.block) + " on SM " + sh(x).straggler.sm : DASH)],
      ["tail (share of the span) *", (x) => fmtNs(sh(x).tail_ns) + " (" + pct(sh(x).tail_ns, sh(x).span_ns) + ")"],
      ["span *", (x) => fmtNs(sh(x).span_ns)],
      ["median block time *", (x) => fmtNs(sh(x).block_p50_ns)]];
    const t = el("table", "facts-table");
    const hr = t.insertRow();
    hr.appendChild(el("th", "", ""));
    hr.appendChild(el("th", "", "this launch"));
    if (r) hr.appendChild(el("th", "", "reference #" + refId));
    rows.forEach((row) => {
      const tr = t.insertRow();
      tr.appendChild(el("th", "", row[0]));
      tr.insertCell().textContent = l ? row[1](l) : DASH;
      if (r) tr.insertCell().textContent = row[1](r);
    });
    box.appendChild(t);
    box.appendChild(el("p", "note", "* shadow clock. " + (rep.stretch_note || "")));
  }

  // ---- selection -------------------------------------------------------------------------------------------
  const select = document.getElementById("ts-launch-select");
  let token = 0, current = -1;
  async function show(i) {
    if (i < 0 || i >= detail.length) return;
    const mine = ++token;
    if (select) select.value = String(i);
    let t = performance.now();
    const id = detail[i].launch, g = groupOf.get(id);
    const refId = g && g.slow && g.group.reference !== undefined ? g.group.reference : null;
    const ri = refId !== null && detailIndex.has(refId) ? detailIndex.get(refId) : -1;
    const d = await decode(i), rd = ri >= 0 ? await decode(ri) : null;
    if (mine !== token) return;  // a newer selection won
    current = i;
    timings.decode = Math.round(performance.now() - t);
    const smRows = Math.max(d.maxSm, rd ? rd.maxSm : 0) + 1;
    facts(id, rd ? refId : null);
    t = performance.now();
    drawHeatmap(document.getElementById("ts-heatmap"), d, smRows);
    timings.heatmap = Math.round(performance.now() - t);
    t = performance.now();
    drawOrder(document.getElementById("ts-order"), d);
    timings.order = Math.round(performance.now() - t);
    const fig = document.getElementById("ts-ref-figure");
    fig.hidden = !rd;
    if (rd) {
      document.getElementById("ts-ref-label").textContent = "#" + refId + " (" + fmtNs(((byId.get(refId) || {}).primary || {}).dur_ns) + ")";
      drawHeatmap(document.getElementById("ts-heatmap-ref"), rd, smRows);
    }
  }
  function showSafely(i) { show(i).catch(record); }

  async function init() {
    // The first launch's block data starts inflating now; the table and the step chart are built meanwhile.
    const first = select && detail.length ? firstLaunch() : -1;
    const shown = first >= 0 ? show(first) : Promise.resolve();
    buildTable();
    mark("table");
    buildRequests();
    mark("requests");
    drawSteps();
    mark("steps");
    if (first >= 0) {
      select.addEventListener("change", () => showSafely(Number(select.value)));
      document.getElementById("ts-prev").addEventListener("click", () => showSafely(Math.max(0, current - 1)));
      document.getElementById("ts-next").addEventListener("click", () => showSafely(Math.min(detail.length - 1, current + 1)));
      document.addEventListener("click", (e) => {
        const a = e.target.closest && e.target.closest("a.ts-show");
        if (!a) return;
        const i = detailIndex.get(Number(a.getAttribute("data-launch")));
        if (i !== undefined) showSafely(i);
      });
      ["ts-heatmap", "ts-heatmap-ref", "ts-order"].forEach((id) => attachTip(document.getElementById(id)));
      let resize = 0;
      window.addEventListener("resize", () => {
        clearTimeout(resize);
        resize = setTimeout(() => { if (current >= 0) showSafely(current); }, 150);
      });
      await shown;
    }
    mark("ready");
  }
  // The launch shown first: #launch=ID in the URL, else the first slow launch, else the first.
  function firstLaunch() {
    const m = /launch=(\d+)/.exec(location.hash);
    if (m && detailIndex.has(Number(m[1]))) return detailIndex.get(Number(m[1]));
    return Math.max(0, detail.findIndex((d) => (d.role || "").startsWith("slow")));
  }

  // Draws every detailed launch once (with a cold cache) and renders every table row: for tests and the
  // benchmark. Resolves to one entry per launch with what was drawn and how long it took.
  window.tsSelftest = async () => {
    let t = performance.now();
    if (table) table.all();
    const out = { rows: table ? table.rows() : 0, rows_ms: performance.now() - t, launches: [] };
    for (let i = 0; i < detail.length; i++) {
      decoded.clear();
      t = performance.now();
      await show(i);
      const heat = document.getElementById("ts-heatmap"), order = document.getElementById("ts-order");
      out.launches.push({ launch: detail[i].launch, drawn: Number(heat.getAttribute("data-drawn")),
                          order_drawn: Number(order.getAttribute("data-drawn")),
                          sum_block: Number(heat.getAttribute("data-sum-block")),
                          sum_sm: Number(heat.getAttribute("data-sum-sm")),
                          sum_order: Number(heat.getAttribute("data-sum-order")),
                          straggler: heat.getAttribute("data-straggler"), ms: performance.now() - t });
    }
    return out;
  };

  window.tsReady = init().catch((e) => { record(e); timings.error = String(e); }).then(() => {
    document.body.setAttribute("data-ready", timings.error ? "error" : "1");
    document.body.setAttribute("data-timings", JSON.stringify(timings));
    return timings;
  });
})();
