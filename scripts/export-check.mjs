#!/usr/bin/env node
// Checks a dataset folder written by `hermes-pipe export` the way its
// consumers read it: every data file (Parquet through DuckDB, npm
// @duckdb/node-api; JSONL line by line), the columns and their types, then
// every row's messages and tools rendered through every chat template of
// cmd/hermes-pipe/testdata/templates with @huggingface/jinja (the renderer of
// transformers.js, which follows transformers' apply_chat_template), and the
// dataset card (README.md: YAML front matter whose configs' data_files globs
// match the data files, and dataset_info).
//
// Usage: node scripts/export-check.mjs [--templates DIR] EXPORT_DIR
//
// What a rendered row must hold: every user text, every tool call's function
// name and each of its argument values (the leaves of the arguments object),
// every tool result and, for templates that render reasoning (found by
// rendering a probe conversation), the reasoning_content of the assistant
// turns after the last user turn (Qwen3 renders no other). A value is found
// as written or JSON-escaped (templates such as Llama 3.1's write a tool
// result with tojson). Assistant text is not asserted: Llama 3.1 drops it
// beside a tool call by design.
//
// The form each template is given, as a transformers user gives it:
//   - arguments: the export writes them as a JSON string (OpenAI form).
//     Templates that test `arguments is string` (Qwen3, Hermes 3) get them so;
//     the others apply `arguments | tojson` and need an object (Hugging Face
//     form), so the string is parsed for them. Arguments that are not a JSON
//     object are passed as written and counted in "unparsable_arguments".
//   - tools: a function's parameters are JSON text in the export (Parquet
//     cannot hold free-form schemas); every template gets the parsed object,
//     the form transformers documents for tools.
//   - messages: keys whose value is null and empty tool_calls lists are
//     dropped (the OpenAI form, where absent fields are omitted). Rows read
//     from Parquet hold every key, and templates that test a key's presence
//     (Llama 3.1: 'tool_calls' in message; Hermes 3: tool_calls is defined)
//     fail on null; how many rows fail unnormalised is reported per template
//     as "fail_as_read", not as a problem.
// A row a template refuses through its own raise_exception (Llama 3.1: one
// tool call per turn) is counted as "refused"; any other error is a problem.
// @huggingface/jinja is stricter than Python's jinja2 in one known way: a
// filter on an undefined value fails (jinja2's `items` and `trim` give
// nothing), so Hermes 3's template fails here on a tool whose parameters have
// no properties or a property without description, where transformers
// renders it.
//
// Prints {"files":{...},"rows":N,"templates":{...},"rendered":M,
// "problems":[...]} on stdout; exits 1 when there are problems (each names
// the file, the row and what was missing), 2 on bad usage.
// Install the packages once: npm ci --prefix scripts.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { Template } from '@huggingface/jinja';
import YAML from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
let templatesDir = path.join(here, '..', 'cmd', 'hermes-pipe', 'testdata', 'templates');
const args = process.argv.slice(2);
const ti = args.indexOf('--templates');
if (ti >= 0) {
  templatesDir = args[ti + 1];
  args.splice(ti, 2);
}
if (args.length !== 1 || !templatesDir) {
  console.error('usage: export-check.mjs [--templates DIR] EXPORT_DIR');
  process.exit(2);
}
const dir = args[0];

const problems = [];
let dropped = 0;
const problem = (msg) => {
  if (problems.length < 100) problems.push(msg);
  else dropped++;
};

// ---- data files -------------------------------------------------------

const fileRe = /^(.+)-(\d{5})-of-(\d{5})\.(parquet|jsonl)$/;
const dataDir = path.join(dir, 'data');
let names = [];
try {
  names = fs.readdirSync(dataDir).filter((n) => !n.startsWith('.')).sort();
} catch (e) {
  problem(`${dataDir}: ${e.message}`);
}
const files = []; // {rel, split, index, of, ext}
for (const n of names) {
  const m = fileRe.exec(n);
  if (!m) {
    problem(`data/${n}: not named <split>-<i:05d>-of-<n:05d>.parquet|jsonl`);
    continue;
  }
  files.push({ rel: `data/${n}`, split: m[1], index: Number(m[2]), of: Number(m[3]), ext: m[4] });
}
if (files.length === 0) problem(`${dataDir}: no data files`);
if (new Set(files.map((f) => f.ext)).size > 1) problem('data/: both Parquet and JSONL files');
const splits = new Map();
for (const f of files) {
  if (!splits.has(f.split)) splits.set(f.split, []);
  splits.get(f.split).push(f);
}
for (const [split, fs_] of splits) {
  const of = fs_[0].of;
  const idx = fs_.map((f) => f.index).sort((a, b) => a - b);
  if (fs_.some((f) => f.of !== of) || idx.length !== of || idx.some((v, i) => v !== i)) {
    problem(`split ${split}: files ${fs_.map((f) => f.rel).join(', ')} are not 0..${of - 1} of ${of}`);
  }
}

// Parquet column types as DuckDB names them, parsed so field order and
// quoting do not matter.
function parseType(s) {
  let i = 0;
  const ws = () => { while (s[i] === ' ') i++; };
  const ident = () => {
    ws();
    if (s[i] === '"') {
      let j = i + 1;
      let out = '';
      while (j < s.length) {
        if (s[j] === '"' && s[j + 1] === '"') { out += '"'; j += 2; continue; }
        if (s[j] === '"') break;
        out += s[j++];
      }
      i = j + 1;
      return out;
    }
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(s.slice(i));
    i += m ? m[0].length : 0;
    return m ? m[0] : '';
  };
  const type = () => {
    ws();
    let t;
    const word = /^[A-Z]+/.exec(s.slice(i))?.[0] ?? '';
    if (word === 'STRUCT') {
      i += word.length;
      ws();
      i++; // (
      const fields = {};
      for (;;) {
        const name = ident();
        fields[name] = type();
        ws();
        if (s[i] === ',') { i++; continue; }
        i++; // )
        break;
      }
      t = { struct: fields };
    } else {
      i += word.length;
      t = { scalar: word };
    }
    while (s.slice(i, i + 2) === '[]') {
      i += 2;
      t = { list: t };
    }
    return t;
  };
  return type();
}
const INT = new Set(['BIGINT', 'INTEGER', 'SMALLINT', 'TINYINT', 'UBIGINT', 'UINTEGER', 'USMALLINT', 'UTINYINT', 'HUGEINT']);
const V = { scalar: 'VARCHAR' };
const wantMessage = {
  struct: {
    role: V,
    content: V,
    reasoning_content: V,
    tool_calls: { list: { struct: { id: V, type: V, function: { struct: { name: V, arguments: V } } } } },
    tool_call_id: V,
    name: V,
  },
};
const wantTools = { list: { struct: { type: V, function: { struct: { name: V, description: V, parameters: V } } } } };
const wantColumns = {
  messages: { list: wantMessage },
  conversations: { list: { struct: { from: V, value: V } } },
  tools: wantTools,
  key: V,
  id: V,
  prompt_index: { scalar: 'INT' },
  sample: { scalar: 'INT' },
  outcome: V,
  model: V,
  reward: { scalar: 'DOUBLE' },
  source: V,
};
function typeDiff(got, want, where) {
  if (want.scalar === 'INT') return got.scalar && INT.has(got.scalar) ? [] : [`${where}: ${show(got)}, want an integer`];
  if (want.scalar) return got.scalar === want.scalar ? [] : [`${where}: ${show(got)}, want ${want.scalar}`];
  if (want.list) return got.list ? typeDiff(got.list, want.list, `${where}[]`) : [`${where}: ${show(got)}, want a list`];
  if (!got.struct) return [`${where}: ${show(got)}, want a struct`];
  const out = [];
  for (const [k, w] of Object.entries(want.struct)) {
    if (!(k in got.struct)) out.push(`${where}.${k}: missing`);
    else out.push(...typeDiff(got.struct[k], w, `${where}.${k}`));
  }
  for (const k of Object.keys(got.struct)) if (!(k in want.struct)) out.push(`${where}.${k}: unexpected field`);
  return out;
}
function show(t) {
  if (t.scalar) return t.scalar;
  if (t.list) return show(t.list) + '[]';
  return 'STRUCT(' + Object.entries(t.struct).map(([k, v]) => `${k} ${show(v)}`).join(', ') + ')';
}

// DuckDB hands BIGINT over as bigint; rows are compared as JSON values.
function plain(v) {
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

let con = null;
async function readParquet(f) {
  if (con === null) con = await (await DuckDBInstance.create(':memory:')).connect();
  const src = `read_parquet('${path.join(dir, f.rel).replaceAll("'", "''")}')`;
  const described = (await con.runAndReadAll(`DESCRIBE SELECT * FROM ${src}`)).getRowObjectsJS();
  const columns = {};
  for (const r of described) columns[r.column_name] = parseType(r.column_type);
  const rows = (await con.runAndReadAll(`SELECT * FROM ${src}`)).getRowObjectsJS().map(plain);
  return { columns, rows };
}
function readJSONL(f) {
  const text = fs.readFileSync(path.join(dir, f.rel), 'utf8');
  const rows = [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  else problem(`${f.rel}: last line has no newline`);
  lines.forEach((line, i) => {
    try {
      rows.push(JSON.parse(line));
    } catch (e) {
      problem(`${f.rel}:${i + 1}: ${e.message}`);
      rows.push(null);
    }
  });
  return { columns: null, rows };
}

// ---- row shape --------------------------------------------------------

const isStr = (v) => typeof v === 'string';
const optStr = (v) => v === undefined || v === null || typeof v === 'string';
const optInt = (v) => v === undefined || v === null || Number.isInteger(v);
function parseObject(s) {
  try {
    const v = JSON.parse(s);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

// checkRow returns the problems of one row's fields (the format is the
// column set: messages or conversations).
function checkRow(row, format, parquet) {
  const out = [];
  if (row === null || typeof row !== 'object' || Array.isArray(row)) return ['not a JSON object'];
  if (!isStr(row.key) || row.key === '') out.push(`key ${JSON.stringify(row.key)}: want a string`);
  if (!isStr(row.outcome) || row.outcome === '') out.push(`outcome ${JSON.stringify(row.outcome)}: want a string`);
  for (const f of ['id', 'model', 'source']) if (!optStr(row[f])) out.push(`${f} ${JSON.stringify(row[f])}: want a string or null`);
  for (const f of ['prompt_index', 'sample']) if (!optInt(row[f])) out.push(`${f} ${JSON.stringify(row[f])}: want an integer`);
  if (!(row.reward === undefined || row.reward === null || typeof row.reward === 'number')) out.push(`reward ${JSON.stringify(row.reward)}: want a number or null`);
  if (row.tools !== null && row.tools !== undefined) {
    if (!Array.isArray(row.tools)) out.push('tools: want a list');
    else row.tools.forEach((t, i) => {
      const fn = t?.function;
      if (t?.type !== 'function' || !fn || !isStr(fn.name) || fn.name === '' || !optStr(fn.description)) {
        out.push(`tools[${i}]: want {type:"function", function:{name, description, parameters}}, got ${JSON.stringify(t).slice(0, 200)}`);
      } else if (isStr(fn.parameters) ? parseObject(fn.parameters) === undefined : parquet || typeof fn.parameters !== 'object' || fn.parameters === null) {
        out.push(`tools[${i}] ${fn.name}: parameters ${JSON.stringify(fn.parameters).slice(0, 200)}: want JSON text of an object`);
      }
    });
  }
  if (format === 'sharegpt') {
    if (!Array.isArray(row.conversations) || row.conversations.length === 0) out.push('conversations: want a non-empty list');
    else row.conversations.forEach((t, i) => {
      if (!['system', 'human', 'gpt', 'tool'].includes(t?.from) || !isStr(t?.value)) out.push(`conversations[${i}]: ${JSON.stringify(t).slice(0, 200)}`);
    });
    return out;
  }
  if (!Array.isArray(row.messages) || row.messages.length === 0) return [...out, 'messages: want a non-empty list'];
  const callIds = new Set();
  row.messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    if (m === null || typeof m !== 'object') return out.push(`${at}: not an object`);
    if (!['user', 'assistant', 'tool'].includes(m.role) && !(m.role === 'system' && i === 0)) out.push(`${at}: role ${JSON.stringify(m.role)}`);
    if (!isStr(m.content)) out.push(`${at}: content ${JSON.stringify(m.content)}: want a string`);
    for (const f of ['reasoning_content', 'tool_call_id', 'name']) if (!optStr(m[f])) out.push(`${at}: ${f} ${JSON.stringify(m[f])}: want a string or null`);
    if (m.reasoning_content && m.role !== 'assistant') out.push(`${at}: reasoning_content on a ${m.role} turn`);
    const calls = m.tool_calls;
    if (calls !== undefined && calls !== null) {
      if (!Array.isArray(calls)) out.push(`${at}: tool_calls: want a list`);
      else {
        if (calls.length > 0 && m.role !== 'assistant') out.push(`${at}: tool_calls on a ${m.role} turn`);
        calls.forEach((c, j) => {
          const fn = c?.function;
          const args = fn?.arguments;
          if (!isStr(c?.id) || c?.type !== 'function' || !fn || !isStr(fn.name) || !(isStr(args) || (!parquet && args !== null && typeof args === 'object' && !Array.isArray(args)))) {
            out.push(`${at}.tool_calls[${j}]: want {id, type:"function", function:{name, arguments}}, got ${JSON.stringify(c).slice(0, 200)}`);
          } else callIds.add(c.id);
        });
      }
    }
    if (m.role === 'tool') {
      if (!isStr(m.tool_call_id) || m.tool_call_id === '') out.push(`${at}: tool turn without tool_call_id`);
      else if (!callIds.has(m.tool_call_id)) out.push(`${at}: tool_call_id ${JSON.stringify(m.tool_call_id)} answers no earlier call`);
    }
  });
  return out;
}

// ---- rendering --------------------------------------------------------

const templates = [];
for (const n of fs.readdirSync(templatesDir).filter((n) => n.endsWith('.jinja')).sort()) {
  const src = fs.readFileSync(path.join(templatesDir, n), 'utf8');
  templates.push({
    name: n.replace(/\.jinja$/, ''),
    tpl: new Template(src),
    stringArgs: /arguments is string/.test(src),
    // The messages of the template's own raise_exception calls: an error
    // with one of them is the template refusing the row, not a failure.
    refusals: new Set([...src.matchAll(/raise_exception\((["'])(.*?)\1\)/g)].map((m) => m[2])),
    stats: { rendered: 0, refused: 0, fail_as_read: 0, renders_reasoning: false },
  });
}
if (templates.length === 0) problem(`${templatesDir}: no *.jinja templates`);
const context = (messages, tools) => ({
  messages,
  tools,
  add_generation_prompt: false,
  bos_token: '<s>',
  eos_token: '</s>',
});

// The probe: does the template render reasoning of the last assistant turn?
const mark = 'reasoning-probe-7f3a';
for (const t of templates) {
  const msgs = [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a', reasoning_content: mark }];
  try {
    t.stats.renders_reasoning = t.tpl.render(context(msgs, [])).includes(mark);
  } catch (e) {
    problem(`template ${t.name}: probe: ${e.message}`);
  }
}

let unparsableArguments = 0;
// argsFor gives a call's arguments in the form template t takes, and the
// values the rendered text must hold.
function callArgs(args, stringArgs) {
  const obj = typeof args === 'string' ? parseObject(args) : args;
  if (obj === undefined) return { given: args, want: [args] };
  return { given: stringArgs ? args : obj, want: leaves(obj) };
}
function leaves(v, out = []) {
  if (v === null) return out;
  if (Array.isArray(v)) v.forEach((x) => leaves(x, out));
  else if (typeof v === 'object') Object.values(v).forEach((x) => leaves(x, out));
  else out.push(typeof v === 'string' ? v : JSON.stringify(v));
  return out;
}
// A string as JSON writes it inside quotes: as JSON.stringify and tojson do,
// and with non-ASCII as \uXXXX, as Python's json.dumps does by default.
const escaped = (s) => JSON.stringify(s).slice(1, -1);
const asciiEscaped = (s) => escaped(s).replace(/[\u0080-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
const holds = (text, s) => s === '' || text.includes(s) || text.includes(escaped(s)) || text.includes(asciiEscaped(s));

function prepare(row, t) {
  const messages = row.messages.map((m) => {
    const out = {};
    for (const [k, v] of Object.entries(m)) {
      if (v === null || v === undefined) continue;
      if (k === 'tool_calls') {
        if (v.length === 0) continue;
        out.tool_calls = v.map((c) => ({ ...c, function: { ...c.function, arguments: callArgs(c.function.arguments, t.stringArgs).given } }));
        continue;
      }
      out[k] = v;
    }
    return out;
  });
  const tools = (row.tools ?? []).map((x) => ({
    ...x,
    function: { ...x.function, parameters: typeof x.function.parameters === 'string' ? parseObject(x.function.parameters) : x.function.parameters },
  }));
  return { messages, tools };
}

// wanted lists what row's rendering through t must hold, with a label each.
function wanted(row, t) {
  const want = [];
  let lastUser = -1;
  row.messages.forEach((m, i) => { if (m.role === 'user') lastUser = i; });
  row.messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    if (m.role === 'user') want.push([`${at} user text`, m.content.trim()]);
    if (m.role === 'tool') want.push([`${at} tool result`, m.content.trim()]);
    if (m.role !== 'assistant') return;
    if (t.stats.renders_reasoning && i > lastUser && m.reasoning_content) want.push([`${at} reasoning`, m.reasoning_content.trim()]);
    (m.tool_calls ?? []).forEach((c, j) => {
      want.push([`${at}.tool_calls[${j}] name`, c.function.name]);
      for (const v of callArgs(c.function.arguments, t.stringArgs).want) want.push([`${at}.tool_calls[${j}] argument value`, String(v).trim()]);
    });
  });
  return want;
}

function render(row, where) {
  let n = 0;
  for (const t of templates) {
    try {
      t.tpl.render(context(row.messages, (row.tools ?? []).map((x) => x)));
    } catch {
      t.stats.fail_as_read++;
    }
    const { messages, tools } = prepare(row, t);
    let text;
    try {
      text = t.tpl.render(context(messages, tools));
    } catch (e) {
      if (t.refusals.has(e.message)) t.stats.refused++;
      else problem(`${where}: template ${t.name}: ${e.message}`);
      continue;
    }
    t.stats.rendered++;
    n++;
    for (const [label, s] of wanted(row, t)) {
      if (!holds(text, s)) problem(`${where}: template ${t.name}: ${label} missing: ${JSON.stringify(s).slice(0, 120)}`);
    }
  }
  return n;
}

// ---- the card ---------------------------------------------------------

function globRe(g) {
  let re = '';
  for (let i = 0; i < g.length; i++) {
    const c = g[i];
    if (c === '*' && g[i + 1] === '*') { re += '.*'; i++; if (g[i + 1] === '/') i++; }
    else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp('^' + re + '$');
}

function checkCard(rowsBySplit, columnNames) {
  const card = path.join(dir, 'README.md');
  let text;
  try {
    text = fs.readFileSync(card, 'utf8');
  } catch (e) {
    return problem(`README.md: ${e.message}`);
  }
  const m = /^---\r?\n([\s\S]*?)\r?\n---\r?\n/.exec(text);
  if (!m) return problem('README.md: no YAML front matter (--- ... --- at the top)');
  let meta;
  try {
    meta = YAML.parse(m[1]);
  } catch (e) {
    return problem(`README.md: front matter: ${e.message}`);
  }
  if (!meta || typeof meta !== 'object') return problem('README.md: front matter is not a mapping');
  if (!Array.isArray(meta.configs) || meta.configs.length === 0) problem('README.md: configs: want a non-empty list');
  const globs = []; // {split, re, glob}
  for (const [ci, c] of (Array.isArray(meta.configs) ? meta.configs : []).entries()) {
    if (!isStr(c?.config_name)) problem(`README.md: configs[${ci}]: config_name missing`);
    const df = c?.data_files;
    const entries = isStr(df) ? [{ split: 'train', path: df }] : Array.isArray(df) ? df.map((d) => (isStr(d) ? { split: 'train', path: d } : d)) : [];
    if (entries.length === 0) problem(`README.md: configs[${ci}]: data_files missing`);
    for (const [di, d] of entries.entries()) {
      for (const p of Array.isArray(d?.path) ? d.path : [d?.path]) {
        if (!isStr(p) || !isStr(d?.split)) { problem(`README.md: configs[${ci}].data_files[${di}]: want {split, path}`); continue; }
        globs.push({ split: d.split, re: globRe(p), glob: p });
      }
    }
  }
  for (const g of globs) {
    const hit = files.filter((f) => g.re.test(f.rel));
    if (hit.length === 0) problem(`README.md: data_files ${g.glob} (${g.split}) matches no data file`);
    for (const f of hit) if (f.split !== g.split) problem(`README.md: data_files ${g.glob} puts ${f.rel} in split ${g.split}`);
  }
  for (const f of files) if (!globs.some((g) => g.re.test(f.rel))) problem(`README.md: ${f.rel} is in no config's data_files`);
  const info = Array.isArray(meta.dataset_info) ? meta.dataset_info[0] : meta.dataset_info;
  if (!info || typeof info !== 'object') return problem('README.md: dataset_info missing');
  if (Array.isArray(info.features) && columnNames) {
    const names = info.features.map((x) => x?.name).sort().join(',');
    if (names !== [...columnNames].sort().join(',')) problem(`README.md: dataset_info.features ${names}, data columns ${[...columnNames].sort().join(',')}`);
  } else if (!info.features) problem('README.md: dataset_info.features missing');
  if (Array.isArray(info.splits)) {
    for (const s of info.splits) {
      const got = rowsBySplit.get(s?.name);
      if (got === undefined) problem(`README.md: dataset_info.splits names ${s?.name}, which has no data file`);
      else if (s.num_examples !== undefined && s.num_examples !== got) problem(`README.md: dataset_info split ${s.name}: num_examples ${s.num_examples}, data files hold ${got}`);
    }
    for (const name of rowsBySplit.keys()) if (!info.splits.some((s) => s?.name === name)) problem(`README.md: dataset_info.splits lacks ${name}`);
  }
}

// ---- main -------------------------------------------------------------

const summary = { files: {}, rows: 0, format: null, templates: {}, rendered: 0, unparsable_arguments: 0, extra_columns: [] };
const rowsBySplit = new Map();
let columnNames = null;
const extra = new Set();
for (const f of files) {
  let data;
  try {
    data = f.ext === 'parquet' ? await readParquet(f) : readJSONL(f);
  } catch (e) {
    problem(`${f.rel}: ${e.message}`);
    continue;
  }
  const first = data.rows.find((r) => r && typeof r === 'object');
  const cols = data.columns ? Object.keys(data.columns) : first ? Object.keys(first) : [];
  const format = cols.includes('conversations') ? 'sharegpt' : 'messages';
  if (summary.format === null) summary.format = format;
  else if (summary.format !== format) problem(`${f.rel}: ${format} rows beside ${summary.format} rows`);
  const want = Object.keys(wantColumns).filter((c) => c !== (format === 'messages' ? 'conversations' : 'messages'));
  if (data.columns) {
    for (const c of want) {
      if (!(c in data.columns)) problem(`${f.rel}: column ${c} missing`);
      else for (const d of typeDiff(data.columns[c], wantColumns[c], c)) problem(`${f.rel}: column ${d}`);
    }
  }
  for (const c of cols) if (!want.includes(c)) extra.add(c);
  if (data.columns) {
    const names = Object.keys(data.columns).sort().join(',');
    if (columnNames === null) columnNames = Object.keys(data.columns);
    else if ([...columnNames].sort().join(',') !== names) problem(`${f.rel}: columns ${names} differ from the other files'`);
  } else if (columnNames === null && first) columnNames = cols;
  data.rows.forEach((row, i) => {
    const where = `${f.rel} row ${i}${data.columns ? '' : ` (line ${i + 1})`}${row && isStr(row.key) ? ` key ${row.key}` : ''}`;
    if (row === null) return;
    if (!data.columns) for (const c of want) if (!(c in row) && !['id', 'model', 'reward', 'source'].includes(c)) problem(`${where}: ${c} missing`);
    const bad = checkRow(row, format, f.ext === 'parquet');
    for (const b of bad) problem(`${where}: ${b}`);
    if (bad.length > 0 || format !== 'messages') return;
    for (const m of row.messages) for (const c of m.tool_calls ?? []) if (isStr(c.function.arguments) && parseObject(c.function.arguments) === undefined) unparsableArguments++;
    if (render(row, where) > 0) summary.rendered++;
  });
  summary.files[f.rel] = data.rows.length;
  summary.rows += data.rows.length;
  rowsBySplit.set(f.split, (rowsBySplit.get(f.split) ?? 0) + data.rows.length);
}
checkCard(rowsBySplit, columnNames);
for (const t of templates) summary.templates[t.name] = t.stats;
summary.unparsable_arguments = unparsableArguments;
summary.extra_columns = [...extra].sort();
summary.splits = Object.fromEntries(rowsBySplit);
if (dropped > 0) problems.push(`... and ${dropped} more problems`);
summary.problems = problems;
process.stdout.write(JSON.stringify(summary) + '\n');
process.exitCode = problems.length > 0 ? 1 : 0;
