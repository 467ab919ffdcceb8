"use strict";
// hermes-pipe view: list and record pages over the read-only JSON API.
const $ = (s, el = document) => el.querySelector(s);
const app = $("#app");
let meta = null, list = { rows: [], sel: 0 }, lastQuery = "";

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of kids.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}
async function getJSON(url) {
  const r = await fetch(url, { credentials: "same-origin" });
  if (!r.ok) throw new Error(url + ": " + r.status + " " + (await r.text()));
  return r.json();
}
const cls = o => ({ completed: "ok", resolved: "ok", compressed: "ok", skipped_under_target: "ok", partial: "warn", max_turns: "warn", unresolved: "warn", empty_patch: "warn", still_over_limit: "warn" })[o] || "bad";
const fmtCost = c => c === null || c === undefined ? "–" : "$" + c.toFixed(5);
// A record's grade (list rows: grade passed/failed/errored, reward) as a cell.
const gradeCls = g => ({ passed: "ok", failed: "bad", errored: "warn" })[g] || "mute";
const fmtReward = (reward, grade) => typeof reward === "number" ? String(+reward.toPrecision(4)) : grade === "errored" ? "grader error" : "–";

// ---- list ----
function params() { return new URLSearchParams(location.hash.split("?")[1] || ""); }
function setParams(p) { p.delete("page"); location.hash = "#/?" + p.toString(); }

async function showList() {
  const p = params();
  const qs = p.toString();
  const old = $("#status");
  if (old) old.textContent = "loading…";
  // The page is fetched before the list is replaced, so a list shown again
  // (the index became ready) never shows empty meanwhile.
  let res, err;
  try { res = await getJSON("/api/records?" + qs); } catch (e) { err = e; }
  const form = filterForm(p);
  const status = h("p", { class: "mute", id: "status" });
  const table = h("table", { id: "records" });
  app.replaceChildren(form, status, table);
  if (err) { status.replaceChildren(h("span", { class: "err" }, err.message)); return; }
  lastQuery = qs;
  list.rows = res.rows; list.sel = Math.min(list.sel, Math.max(0, res.rows.length - 1));
  const page = +(p.get("page") || 0), size = +(p.get("size") || 50);
  const ix = res.indexing;
  const total = res.complete ? String(res.total) : (ix ? "≥ " : "at least ") + res.total;
  let text = `${total} matching of ${meta.records} records`;
  if (ix) {
    text += ` · indexing ${ix.percent} %` + (res.complete ? "" : ` (the first ${res.scanned} records read)`) +
      (res.order === "ledger" ? " · in ledger order until the index is ready" : "");
  } else if (p.get("q")) text += ` (text searched in ${res.scanned} records${res.complete ? "" : ", stopped early"})`;
  status.replaceChildren(text);
  if (res.note) status.append(h("br"), h("span", { class: "warn", id: "note" }, res.note));
  const sort = p.get("sort") || "";
  const th = (label, key, num) => h("th", { class: num ? "n" : "", "data-sort": key, onclick: () => { const q = params(); q.set("sort", sort === key ? "-" + key : key); setParams(q); } },
    label + (sort === key ? " ▲" : sort === "-" + key ? " ▼" : ""));
  const graded = meta.graded || res.rows.some(r => r.grade);
  const head = h("tr", {}, th("#", "key"), h("th", {}, "key / id"), h("th", {}, "prompt"), h("th", {}, "outcome"), meta.kind === "compress" ? h("th", {}, "compress") : null,
    h("th", {}, "tools"), th("failures", "failures", 1), th("turns", "turns", 1), th("tokens", "tokens", 1), th("ms", "duration", 1), th("cost", "cost", 1),
    meta.kind === "compress" ? th("ratio", "ratio", 1) : null, graded ? th("reward", "reward", 1) : null);
  const body = h("tbody", {}, res.rows.map((r, k) => h("tr", { "data-i": r.i, class: k === list.sel ? "sel" : "", onclick: () => openRecord(r.i) },
    h("td", { class: "n" }, r.i), h("td", {}, h("code", {}, r.key), r.id ? h("span", { class: "mute" }, " " + r.id) : ""),
    h("td", { class: "prompt", title: r.prompt || "" }, r.prompt || ""),
    h("td", { class: cls(r.outcome) + " outcome" }, r.outcome), meta.kind === "compress" ? h("td", { class: cls(r.compress) }, r.compress) : null,
    h("td", {}, r.tools.join(", ")), h("td", { class: "n" + (r.failures ? " bad" : "") }, r.failures), h("td", { class: "n" }, r.turns),
    h("td", { class: "n" }, r.tokens), h("td", { class: "n" }, r.duration_ms), h("td", { class: "n" }, fmtCost(r.cost_usd)),
    meta.kind === "compress" ? h("td", { class: "n" }, r.ratio ? r.ratio.toFixed(3) : "") : null,
    graded ? h("td", { class: "n reward " + gradeCls(r.grade), title: r.grade || "ungraded" }, fmtReward(r.reward, r.grade)) : null)));
  table.replaceChildren(h("thead", {}, head), body);
  const go = d => { const q = params(); q.set("page", page + d); location.hash = "#/?" + q.toString(); };
  app.append(h("div", { class: "pager" }, h("button", { disabled: page === 0, onclick: () => go(-1) }, "← previous"),
    `page ${page + 1}`, h("button", { disabled: (page + 1) * size >= res.total && res.complete, onclick: () => go(1) }, "next →")));
}

function filterForm(p) {
  const sel = (name, label, opts) => h("label", {}, label, h("select", { name, id: "f-" + name },
    h("option", { value: "" }, "any"), opts.map(o => h("option", { value: o, selected: p.get(name) === o }, o))));
  const num = (name, label) => h("label", {}, label, h("input", { name, class: "n", type: "number", min: 0, step: "any", value: p.get(name) || "" }));
  const signed = (name, label) => h("label", {}, label, h("input", { name, id: "f-" + name, class: "n", type: "number", step: "any", value: p.get(name) || "" }));
  const f = h("form", { class: "filters", id: "filters", onsubmit: e => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(f)) if (v !== "") q.set(k, v);
    if (params().get("sort")) q.set("sort", params().get("sort"));
    setParams(q);
  } },
    h("label", {}, "search", h("input", { name: "q", id: "q", type: "search", placeholder: "text in the conversation (/)", value: p.get("q") || "" })),
    sel("outcome", "outcome", Object.keys(meta.outcomes).sort()),
    meta.toolsets.length ? sel("toolset", "toolset", meta.toolsets) : null,
    meta.tools.length ? sel("tool", "tool used", meta.tools) : null,
    sel("failures", "tool failures", ["yes", "no"]),
    Object.keys(meta.compress).length ? sel("compress", "compress outcome", Object.keys(meta.compress).sort()) : null,
    num("turns_min", "turns ≥"), num("turns_max", "turns ≤"), num("tokens_min", "tokens ≥"), num("tokens_max", "tokens ≤"),
    num("cost_min", "cost ≥ $"), num("cost_max", "cost ≤ $"),
    meta.graded || p.get("grade") ? sel("grade", "grade", ["passed", "failed", "errored", "graded", "ungraded"]) : null,
    meta.graded || p.get("reward_min") || p.get("reward_max") ? [signed("reward_min", "reward ≥"), signed("reward_max", "reward ≤")] : null,
    h("button", { type: "submit", id: "apply" }, "apply"));
  f.addEventListener("change", e => { if (e.target.tagName === "SELECT") f.requestSubmit(); });
  return f;
}

function openRecord(i) { location.hash = "#/r/" + i + (lastQuery ? "?" + lastQuery : ""); }

// ---- record ----
function prettyJSON(s) { try { return JSON.stringify(JSON.parse(s), null, 2); } catch { return s; } }
const CUT = /(\.\.\. \[output truncated: \d+ bytes omitted\] \.\.\.| \.\.\. \[line cut: [^\]]*\])/;

function textBlock(s) {
  // cut-output markers and patches stand out
  if (/^(diff --git |--- a\/|\+\+\+ b\/|@@ )/m.test(s)) return diffBlock(s);
  const pre = h("pre", {});
  for (const part of s.split(CUT)) pre.append(CUT.test(part) ? h("span", { class: "cut" }, part) : part);
  return pre;
}
function diffBlock(s) {
  const pre = h("pre", { class: "diff" });
  for (const line of s.split("\n")) {
    const c = /^(diff --git|\+\+\+ |--- )/.test(line) ? "file" : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    pre.append(c ? h("span", { class: c }, line) : line + "\n");
  }
  return pre;
}
function toolResponse(js) {
  let v; try { v = JSON.parse(js); } catch { return textBlock(js); }
  const box = h("div", {});
  const content = v && typeof v === "object" && "content" in v ? v.content : v;
  const name = v && v.name ? h("b", {}, v.name) : null;
  let inner = content;
  if (typeof inner === "string") { try { inner = JSON.parse(inner); } catch { } }
  const exit = inner && typeof inner === "object" && "exit_code" in inner ? h("span", { class: "exit" + (inner.exit_code ? " bad" : "") }, "exit " + inner.exit_code) : null;
  box.append(h("div", {}, name, " ", exit));
  if (inner && typeof inner === "object" && typeof inner.output === "string") {
    box.append(textBlock(inner.output));
    const rest = Object.assign({}, inner); delete rest.output;
    box.append(h("pre", {}, JSON.stringify(rest, null, 2)));
  } else box.append(textBlock(typeof inner === "string" ? inner : JSON.stringify(inner, null, 2)));
  return box;
}
function renderTurn(t, k, ctx) {
  const who = t.from;
  const region = ctx.region && k >= ctx.region[0] && k < ctx.region[1];
  const el = h("div", { class: "turn " + who + (typeof t.value === "string" && t.value.startsWith("[CONTEXT SUMMARY]:") ? " summary" : "") + (region ? " region" : ""), id: (ctx.prefix || "turn-") + k },
    h("div", { class: "who" }, `${k}. ${who}`, ctx.tokens && ctx.tokens[k] !== undefined ? h("span", { class: "tok" }, (ctx.est ? " · ≈" : " · ") + ctx.tokens[k] + " tokens") : "",
      region ? h("span", { class: "mute" }, " · summarised") : ""));
  const v = typeof t.value === "string" ? t.value : JSON.stringify(t.value, null, 2);
  if (who === "system") {
    el.append(h("details", { class: "system" }, h("summary", {}, `system prompt (${v.length} chars)`), h("pre", {}, v)));
    return el;
  }
  if (el.classList.contains("summary")) el.append(h("div", { class: "mute" }, "summary of the compressed region"));
  const re = /<think>([\s\S]*?)<\/think>|<tool_call>([\s\S]*?)<\/tool_call>|<tool_response>([\s\S]*?)<\/tool_response>/g;
  let last = 0, m, nresp = 0;
  while ((m = re.exec(v))) {
    const before = v.slice(last, m.index).trim();
    if (before) el.append(textBlock(before));
    if (m[1] !== undefined) {
      const body = m[1].trim();
      el.append(h("details", { class: "think" }, h("summary", {}, body ? `thinking (${body.length} chars)` : "thinking (empty)"), h("pre", {}, body)));
    } else if (m[2] !== undefined) {
      ctx.calls.push(m[2]);
      let name = ""; try { name = JSON.parse(m[2]).name; } catch { }
      el.append(h("div", { class: "call" }, "tool call ", h("b", {}, name), h("pre", {}, prettyJSON(m[2].trim()))));
    } else {
      const call = ctx.calls[ctx.resp++];
      let name = ""; try { name = JSON.parse(call).name; } catch { }
      // A result that failed (tool_stats' rule, judged by the server) is
      // shown apart from one that succeeded.
      const failed = ((ctx.failed || {})[k] || []).includes(nresp++);
      el.append(h("div", { class: "call " + (failed ? "tool-error" : "tool-result") }, h("span", { class: "label" }, failed ? "error from" : "response" + (name ? " to" : "")), " ",
        name ? h("b", {}, name) : "", toolResponse(m[3].trim())));
    }
    last = re.lastIndex;
  }
  const rest = v.slice(last).trim();
  if (rest) el.append(textBlock(rest));
  return el;
}

async function showRecord(i) {
  app.replaceChildren(h("p", { class: "mute" }, "loading…"));
  let d;
  try { d = await getJSON("/api/record/" + i); } catch (e) { app.replaceChildren(h("p", { class: "err" }, e.message)); return; }
  const r = d.record;
  const qs = location.hash.includes("?") ? location.hash.split("?")[1] : "";
  const back = "#/" + (qs ? "?" + qs : "");
  // j/k walk the list the record was opened from: its filters, search and sort.
  let near = { prev: -1, next: -1 };
  try { near = await getJSON("/api/record/" + i + "/near" + (qs ? "?" + qs : "")); } catch (e) { near = { prev: -1, next: -1, error: e.message }; }
  const step = (j, id, label, stopped) => j >= 0 ? h("a", { href: "#/r/" + j + (qs ? "?" + qs : ""), id }, label) : stopped ? h("span", { class: "mute" }, label + ": search stopped") : "";
  const nav = h("div", { class: "pager" }, h("a", { href: back, id: "back" }, "← list (Esc)"),
    step(near.prev, "prev", "previous (k)", near.prev_stopped), step(near.next, "next", "next (j)", near.next_stopped),
    h("a", { href: "/raw/" + i, id: "raw", target: "_blank" }, "raw JSON"),
    h("button", { id: "toggle-raw", onclick: () => { const p = $("#rawpre"); p.hidden = !p.hidden; } }, "show raw here"));
  const kv = (rows) => h("table", { class: "kv" }, rows.filter(x => x[1] !== undefined && x[1] !== null && x[1] !== "").map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, v))));
  const tools = Object.entries(r.tool_stats || {}).map(([n, s]) => `${n} ${s.success}/${s.count}`).join(", ");
  const metaT = kv([["key", h("code", {}, r.key || d.key)], ["id", r.id], ["outcome", r.outcome === undefined ? "" : h("span", { class: cls(r.outcome), id: "outcome" }, r.outcome)],
    ["error", r.error ? h("span", { class: "bad" }, r.error) : ""], ["model", r.model], ["prompt / sample", r.prompt_index === undefined ? "" : `${r.prompt_index} / ${r.sample ?? 0}`],
    ["api calls", r.api_calls], ["tokens", r.usage ? `${r.usage.total_tokens} (${r.usage.prompt_tokens} prompt, ${r.usage.completion_tokens} completion)` : ""],
    ["cost", fmtCost(r.cost_usd)], ["duration", r.duration_ms + " ms"], ["timings", recordTimings(r.timings)], ["toolsets", (r.toolsets_used || []).join(", ")],
    ["tools (ok/calls)", tools], ["reasoning", r.reasoning_stats ? `${r.reasoning_stats.turns_with_reasoning} of ${r.reasoning_stats.total_assistant_turns} turns` : ""],
    ["reward", typeof r.reward === "number" ? h("span", { id: "reward", class: gradeCls(gradeOf(r)) }, String(r.reward)) : r.grade ? h("span", { id: "reward", class: "warn" }, "null (the grader failed)") : ""],
    ["grade", r.grade ? h("span", { id: "grade" }, gradeText(r.grade)) : ""],
    ["folder", d.dir]]);
  const parts = [nav, h("h2", {}, "record ", h("code", {}, r.key || d.key)), metaT];
  if (r.grade && typeof r.grade === "object" && r.grade.output) parts.push(h("h3", {}, "grader output (tail)"), h("pre", { id: "grade-output" }, String(r.grade.output)));
  const cm = r.compression_metrics;
  if (cm) parts.push(compressPanel(cm));
  const swePatch = findKey(r.extra, "model_patch");
  if (d.swe || swePatch) parts.push(swePanel(d.swe, swePatch));
  const turns = r.conversations || [];
  if (cm && cm.outcome) {
    parts.push(await compareView(i, cm, turns, d.tool_failures));
  } else {
    const ctx = { calls: [], resp: 0, failed: d.tool_failures };
    const conv = h("div", { id: "conversation" }, turns.map((t, k) => renderTurn(t, k, ctx)));
    parts.push(h("h3", {}, `conversation (${turns.length} turns)`), conv);
  }
  if (r.metadata) parts.push(h("h3", {}, "metadata"), h("pre", {}, JSON.stringify(r.metadata, null, 2)));
  parts.push(h("pre", { id: "rawpre", hidden: true }, JSON.stringify(r, null, 2)));
  app.replaceChildren(...parts);
  window.scrollTo(0, 0);
}
// gradeOf is a record's grade as the list names it (report.Grade's rule).
function gradeOf(r) {
  const g = r.grade && typeof r.grade === "object" ? r.grade : null;
  if (g && g.passed === true) return "passed";
  if (!g && typeof r.reward !== "number") return "";
  return typeof r.reward === "number" ? "failed" : "errored";
}
function gradeText(g) {
  if (!g || typeof g !== "object") return String(g);
  const verdict = g.passed === true ? "passed" : g.passed === false ? "failed" : "no verdict";
  return [g.grader ? `${g.grader}: ${verdict}` : verdict, typeof g.duration_ms === "number" ? g.duration_ms + " ms" : "",
    g.error ? "error: " + g.error : ""].filter(Boolean).join(" · ");
}
function findKey(o, key) {
  if (!o || typeof o !== "object") return undefined;
  if (key in o) return o[key];
  for (const v of Object.values(o)) { const f = findKey(v, key); if (f !== undefined) return f; }
  return undefined;
}
function compressPanel(cm) {
  const reg = cm.compression_region || {};
  return h("div", { id: "compress" }, h("h3", {}, "compression"),
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("b", { class: cls(cm.outcome) }, cm.outcome), "outcome"),
      h("div", { class: "card" }, h("b", {}, cm.original_tokens), "original tokens"),
      h("div", { class: "card" }, h("b", {}, cm.compressed_tokens), "compressed tokens"),
      h("div", { class: "card" }, h("b", {}, (+cm.compression_ratio).toFixed(3)), "ratio"),
      h("div", { class: "card" }, h("b", {}, `${cm.original_turns} → ${cm.compressed_turns}`), "turns"),
      reg.turns_count ? h("div", { class: "card" }, h("b", {}, `${reg.start_idx}–${reg.end_idx}`), "original turns summarised") : null),
    h("p", { class: "mute" }, "The summary turn is highlighted below; turns outside the region are the original's, unchanged."));
}
// estTokens is the byte-based estimate used when a record carries no
// per-turn counts (compressed before they were recorded): UTF-8 bytes / 4.
const enc = new TextEncoder();
const estTokens = turns => turns.map(t => Math.ceil(enc.encode(typeof t.value === "string" ? t.value : JSON.stringify(t.value)).length / 4));
const sum = a => a.reduce((x, y) => x + y, 0);

async function compareView(i, cm, turns, failed) {
  const reg = cm.compression_region || {};
  let o;
  try { o = await getJSON("/api/record/" + i + "/original"); } catch (e) { o = { found: false, why: e.message }; }
  const orig = o.found ? (o.record.conversations || []) : null;
  // Counts as compress made them (its tokenizer, turn overhead included),
  // or an estimate clearly marked when the record has none.
  const side = (list, counted) => counted && counted.length === list.length ? { tokens: counted, est: false } : { tokens: estTokens(list), est: true };
  const cs = side(turns, cm.compressed_turn_tokens);
  const left = h("div", { id: "original", class: "side" });
  if (orig) {
    const os = side(orig, cm.original_turn_tokens);
    const ctx = { calls: [], resp: 0, tokens: os.tokens, est: os.est, prefix: "orig-", region: reg.turns_count ? [reg.start_idx, reg.end_idx] : null };
    left.append(h("h4", {}, `original: ${orig.length} turns, ${os.est ? "≈" : ""}${sum(os.tokens)} tokens`),
      h("p", { class: "mute src" }, "read from ", h("code", {}, o.source)), ...orig.map((t, k) => renderTurn(t, k, ctx)));
  } else {
    left.append(h("h4", {}, "original"), h("p", { class: "warn", id: "original-missing" }, o.why || "not found"));
  }
  const ctx = { calls: [], resp: 0, tokens: cs.tokens, est: cs.est, failed };
  const right = h("div", { id: "conversation", class: "side" }, h("h4", {}, `compressed: ${turns.length} turns, ${cs.est ? "≈" : ""}${sum(cs.tokens)} tokens`),
    h("p", { class: "mute src" }, "this record"), ...turns.map((t, k) => renderTurn(t, k, ctx)));
  const note = cs.est ? "Token counts marked ≈ are estimates (UTF-8 bytes / 4): this record carries no per-turn counts." :
    "Token counts per turn are compress's own (its tokenizer, turn overhead included).";
  return h("div", {}, h("h3", {}, "original and compressed"), h("p", { class: "mute" }, note + " Summarised turns of the original and the summary turn are highlighted."),
    h("div", { class: "compare", id: "compare" }, left, right));
}

function swePanel(s, patch) {
  const box = h("div", { id: "swe" }, h("h3", {}, "SWE"));
  if (s) {
    const inst = s.instance || {};
    box.append(h("p", {}, "instance ", h("code", {}, s.id), ": ", h("b", { class: cls(inst.outcome) }, inst.outcome),
      s.gate ? [" · gate ", h("b", { class: s.gate === "pass" ? "ok" : s.gate === "fail" ? "bad" : "warn" }, s.gate)] : "",
      s.baseline ? [" · vs baseline ", h("code", {}, s.baseline), ": ", h("b", { id: "swe-change", class: { regressed: "bad", unjudged: "warn", fixed: "ok" }[s.change] || "" }, s.change || (s.regressed ? "regressed" : "no regression"))] : ""));
    if (s.gate && (s.reasons || []).length) box.append(h("ul", { class: "mute", id: "gate-reasons" }, s.reasons.map(x => h("li", {}, x))));
    const ts = inst.tests_status;
    if (ts) box.append(h("div", { class: "grid", id: "swe-tests" }, ["FAIL_TO_PASS", "PASS_TO_PASS"].map(k => h("div", {}, h("b", {}, k, ` ${((ts[k] || {}).success || []).length}/${((ts[k] || {}).success || []).length + ((ts[k] || {}).failure || []).length} pass`),
      h("ul", {}, ((ts[k] || {}).success || []).map(t => h("li", { class: "ok" }, "✓ " + t)), ((ts[k] || {}).failure || []).map(t => h("li", { class: "bad" }, "✗ " + t)))))));
    else if (inst.reason) box.append(h("p", { class: "mute" }, inst.reason));
  }
  if (typeof patch === "string") box.append(h("h4", {}, "patch"), patch ? h("div", { id: "patch" }, diffBlock(patch)) : h("p", { class: "mute" }, "empty patch"));
  return box;
}

// ---- timings ----
const fmtMS = ms => ms < 1000 ? ms + " ms" : ms < 60000 ? (ms / 1000).toFixed(1) + " s" : Math.floor(ms / 60000) + " min " + Math.floor(ms / 1000 % 60) + " s";
// A record's timings on one line: the parts that took any time.
function recordTimings(t) {
  if (!t) return "";
  const parts = [["model", t.model_ms], ["tool", t.tool_ms], ["sandbox start", t.sandbox_start_ms], ["sandbox close", t.sandbox_close_ms],
    ["grader", t.grader_ms], ["queue", t.queue_ms]].filter(([, v]) => v > 0);
  return h("span", { id: "record-timings" }, parts.length ? parts.map(([k, v]) => `${k} ${fmtMS(v)}`).join(" · ") : "none measured");
}
// The run's timings page: each part's share of the wall time and its
// percentiles per record (GET /api/timings, the figures of `stats`).
async function showTimings() {
  let res, err;
  try { res = await getJSON("/api/timings"); } catch (e) { err = e; }
  const back = h("div", { class: "pager" }, h("a", { href: "#/", id: "back" }, "← list (Esc)"));
  if (err) { app.replaceChildren(back, h("p", { class: "err" }, err.message)); return; }
  const t = res.timings;
  if (!t || !t.records) { app.replaceChildren(back, h("h2", {}, "timings"), h("p", { class: "mute", id: "timings-none" }, "No record of this run carries timings.")); return; }
  const num = v => h("td", { class: "n" }, v);
  const rows = t.parts.filter(p => p.total_ms > 0 || p.max_ms > 0).map(p => h("tr", {}, h("td", {}, p.name), num((100 * p.share).toFixed(1) + " %"),
    h("td", {}, h("span", { class: "bar", style: `width:${Math.round(200 * p.share)}px` })),
    num(fmtMS(p.total_ms)), num(fmtMS(p.p50_ms)), num(fmtMS(p.p90_ms)), num(fmtMS(p.p99_ms)), num(fmtMS(p.max_ms))));
  const head = h("tr", {}, ["part", "share", "", "total", "p50", "p90", "p99", "max"].map(x => h("th", {}, x)));
  app.replaceChildren(back, h("h2", {}, "timings"),
    h("p", {}, `Over ${t.records} records, ${fmtMS(t.wall_ms)} of wall time (waiting for a worker, then the record's duration).`),
    h("table", { id: "timings" }, head, rows));
}

// ---- routing and keys ----
function showMeta() {
  const ix = meta.indexing;
  $("#meta").textContent = `${meta.kind || "output"} · ${meta.records} records · ${meta.dirs.join(", ")}` +
    (!ix ? "" : ix.error ? " · the index could not be built: " + ix.error : ` · indexing ${ix.percent} %`);
}
// While the index is built, the header follows its progress; once it is
// ready the list is shown again from it.
let watching = false;
async function watchIndex() {
  if (watching) return;
  watching = true;
  while (meta.indexing && !meta.indexing.error) {
    await new Promise(r => setTimeout(r, 1000));
    try { meta = await getJSON("/api/meta"); } catch { continue; }
    showMeta();
    if (!meta.indexing && !location.hash.startsWith("#/r/")) await route();
  }
  watching = false;
}
async function route() {
  if (!meta) {
    meta = await getJSON("/api/meta");
    showMeta();
    watchIndex();
  }
  const m = location.hash.match(/^#\/r\/(\d+)/);
  if (m) await showRecord(+m[1]); else if (location.hash.startsWith("#/timings")) await showTimings(); else await showList();
  document.body.dataset.ready = location.hash || "#/";
}
window.addEventListener("hashchange", route);
document.addEventListener("keydown", e => {
  const typing = /INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName);
  if (e.key === "Escape") {
    if (typing) { document.activeElement.blur(); return; }
    const b = $("#back"); if (b) location.hash = b.getAttribute("href");
    return;
  }
  if (typing) return;
  if (e.key === "/") { e.preventDefault(); if (!$("#q")) location.hash = "#/"; else $("#q").focus(); return; }
  const rec = location.hash.startsWith("#/r/");
  if (e.key === "j" || e.key === "k") {
    if (rec) { const a = $(e.key === "j" ? "#next" : "#prev"); if (a) location.hash = a.getAttribute("href"); return; }
    const rows = document.querySelectorAll("#records tbody tr"); if (!rows.length) return;
    list.sel = Math.max(0, Math.min(rows.length - 1, list.sel + (e.key === "j" ? 1 : -1)));
    rows.forEach((r, k) => r.classList.toggle("sel", k === list.sel));
    rows[list.sel].scrollIntoView({ block: "nearest" });
  }
  if (e.key === "Enter" && !rec) { const r = document.querySelectorAll("#records tbody tr")[list.sel]; if (r) openRecord(+r.dataset.i); }
});
route();
