#!/usr/bin/env node
// Reads hermes-pipe Parquet shards with DuckDB (npm @duckdb/node-api, an
// independent Parquet reader) and compares every row with the JSONL output of
// the same records: raw_json must be the JSONL line byte for byte, and each
// typed column must hold what the line holds (null when the field is absent
// or of another JSON type; see pipeline/parquet.go). It also checks the
// column types external readers rely on, e.g. conversations as
// STRUCT("from" VARCHAR, "value" VARCHAR)[]. With --union-by-name the
// shards are read as DuckDB reads a folder that mixes schema versions
// (read_parquet(..., union_by_name = true)): a column a shard lacks (success,
// before schema version 2; timings, reward, grade and logprobs before
// version 3) is null in its rows.
//
// Usage: node scripts/parquet-check.mjs [--union-by-name] --jsonl FILE SHARD.parquet...
//
// Prints {"rows":N,"compared":M,"problems":[...]} on stdout and exits 1 when
// there are problems. Install the package once: npm ci --prefix scripts.

import fs from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const union = process.argv.includes('--union-by-name');
const args = process.argv.slice(2).filter((a) => a !== '--union-by-name');
const at = args.indexOf('--jsonl');
if (at < 0 || at + 1 >= args.length) {
  console.error('usage: parquet-check.mjs [--union-by-name] --jsonl FILE SHARD.parquet...');
  process.exit(2);
}
const jsonlPath = args[at + 1];
const shards = args.filter((_, i) => i !== at && i !== at + 1);
if (shards.length === 0) {
  console.error('parquet-check: no shard given');
  process.exit(2);
}

const problems = [];
const problem = (msg) => { if (problems.length < 50) problems.push(msg); };

// JSONL records by key; a verbatim record without a key is found by its line.
const byKey = new Map();
for (const line of fs.readFileSync(jsonlPath, 'utf8').split('\n')) {
  if (line === '') continue;
  const rec = JSON.parse(line);
  byKey.set(typeof rec.key === 'string' ? rec.key : line, { line, rec });
}

const wantTypes = {
  key: 'VARCHAR',
  id: 'VARCHAR',
  prompt_index: 'BIGINT',
  sample: 'BIGINT',
  conversations: 'STRUCT("from" VARCHAR, "value" VARCHAR)[]',
  outcome: 'VARCHAR',
  success: 'BOOLEAN',
  completed: 'BOOLEAN',
  partial: 'BOOLEAN',
  api_calls: 'BIGINT',
  usage: 'STRUCT(prompt_tokens BIGINT, completion_tokens BIGINT, total_tokens BIGINT, cached_prompt_tokens BIGINT, reasoning_tokens BIGINT)',
  cost_usd: 'DOUBLE',
  toolsets_used: 'VARCHAR[]',
  tool_stats: 'VARCHAR',
  tool_error_counts: 'VARCHAR',
  reasoning_stats: 'STRUCT(total_assistant_turns BIGINT, turns_with_reasoning BIGINT, turns_without_reasoning BIGINT, has_any_reasoning BOOLEAN)',
  model: 'VARCHAR',
  duration_ms: 'BIGINT',
  timings: 'STRUCT(model_ms BIGINT, tool_ms BIGINT, sandbox_start_ms BIGINT, sandbox_close_ms BIGINT, queue_ms BIGINT, grader_ms BIGINT)',
  reward: 'DOUBLE',
  grade: 'STRUCT(grader VARCHAR, passed BOOLEAN, "value" DOUBLE, output VARCHAR, duration_ms BIGINT, "error" VARCHAR)',
  error: 'VARCHAR',
  metadata: 'VARCHAR',
  extra: 'VARCHAR',
  logprobs: 'STRUCT(turn BIGINT, tokens VARCHAR[], logprobs DOUBLE[], token_ids BIGINT[])[]',
  raw_json: 'VARCHAR',
};

const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
const list = '[' + shards.map((p) => `'${p.replaceAll("'", "''")}'`).join(', ') + ']';
const source = union ? `read_parquet(${list}, union_by_name = true)` : `read_parquet(${list})`;

const described = (await con.runAndReadAll(`DESCRIBE SELECT * FROM ${source}`)).getRowObjectsJS();
const gotTypes = Object.fromEntries(described.map((r) => [r.column_name, r.column_type]));
for (const [name, type] of Object.entries(wantTypes)) {
  if (gotTypes[name] !== type) problem(`column ${name}: type ${gotTypes[name]}, want ${type}`);
}
for (const name of Object.keys(gotTypes)) {
  if (!(name in wantTypes)) problem(`unexpected column ${name}`);
}

const rows = (await con.runAndReadAll(`SELECT * FROM ${source}`)).getRowObjectsJS();

// Strings as encoding/json decodes them: a lone surrogate becomes U+FFFD.
const str = (v) => (typeof v === 'string' ? v.toWellFormed() : null);
const int = (v) => (typeof v === 'number' && Number.isInteger(v) ? v : null);
const bool = (v) => (typeof v === 'boolean' ? v : null);
const obj = (v) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : null);
const num = (v) => (typeof v === 'bigint' ? Number(v) : v);
const dbl = (v) => (typeof v === 'number' ? v : null);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
// A turn's from/value: the string, or the JSON text of another value.
const text = (got, want) => (typeof want === 'string' ? got === want.toWellFormed() : want === undefined ? got === '' : same(JSON.parse(got), want));

// A member read as text: the string, "" when absent, else its JSON text.
const textOf = (v) => (typeof v === 'string' ? v.toWellFormed() : v === undefined ? '' : JSON.stringify(v));
// A list of numbers: null unless every element is one of conv's kind.
const numbers = (l, ok) => (Array.isArray(l) && l.every(ok) ? l : null);

// The grade and logprobs columns against the record's members.
function checkGraded(where, row, rec) {
  const g = obj(rec.grade);
  if (g === null) {
    if (row.grade !== null) problem(`${where}: grade should be null`);
  } else {
    const got = row.grade === null ? null : { ...row.grade, duration_ms: num(row.grade.duration_ms) };
    const want = { grader: textOf(g.grader), passed: bool(g.passed), value: dbl(g.value), output: textOf(g.output), duration_ms: int(g.duration_ms) ?? 0, error: textOf(g.error) };
    if (!same(got, want)) problem(`${where}: grade ${JSON.stringify(got)}, JSONL ${JSON.stringify(rec.grade)}`);
  }
  if (!Array.isArray(rec.logprobs)) {
    if (row.logprobs !== null) problem(`${where}: logprobs should be null`);
    return;
  }
  const want = rec.logprobs.map((e) => {
    const o = obj(e) ?? {};
    return {
      turn: int(o.turn) ?? 0,
      tokens: Array.isArray(o.tokens) ? o.tokens.map(textOf) : null,
      logprobs: numbers(o.logprobs, (v) => typeof v === 'number'),
      token_ids: numbers(o.token_ids, Number.isInteger),
    };
  });
  const got = row.logprobs === null ? null : row.logprobs.map((e) => ({
    turn: num(e.turn), tokens: e.tokens, logprobs: e.logprobs, token_ids: e.token_ids === null ? null : e.token_ids.map(num),
  }));
  if (!same(got, want)) problem(`${where}: logprobs ${JSON.stringify(got)}, JSONL ${JSON.stringify(rec.logprobs)}`);
}

let compared = 0;
for (const row of rows) {
  const entry = byKey.get(row.key) ?? byKey.get(row.raw_json);
  if (!entry) {
    problem(`row ${row.key}: not in the JSONL output`);
    continue;
  }
  const { line, rec } = entry;
  const where = `row ${row.key}`;
  if (row.raw_json !== line) problem(`${where}: raw_json differs from the JSONL line`);
  if (typeof rec.key === 'string') {
    for (const f of ['key', 'outcome']) if (row[f] !== rec[f]) problem(`${where}: ${f} ${row[f]}, JSONL ${rec[f]}`);
    for (const f of ['prompt_index', 'sample']) if (num(row[f]) !== rec[f]) problem(`${where}: ${f} ${row[f]}, JSONL ${rec[f]}`);
  }
  if (!Array.isArray(rec.conversations)) {
    if (row.conversations !== null) problem(`${where}: conversations should be null`);
  } else if (!Array.isArray(row.conversations) || row.conversations.length !== rec.conversations.length) {
    problem(`${where}: conversations ${JSON.stringify(row.conversations)}, JSONL has ${rec.conversations.length} turns`);
  } else {
    rec.conversations.forEach((t, i) => {
      const got = row.conversations[i];
      const want = obj(t) ?? {};
      if (!text(got.from, want.from) || !text(got.value, want.value)) {
        problem(`${where}: turn ${i} ${JSON.stringify(got)}, JSONL ${JSON.stringify(t)}`);
      }
    });
  }
  const scalar = { id: str, success: bool, completed: bool, partial: bool, api_calls: int, cost_usd: dbl, model: str, duration_ms: int, error: str, reward: dbl };
  for (const [f, conv] of Object.entries(scalar)) {
    const want = rec[f] === undefined ? null : conv(rec[f]);
    if (num(row[f]) !== want) problem(`${where}: ${f} ${row[f]}, JSONL ${JSON.stringify(rec[f])}`);
  }
  for (const f of ['usage', 'reasoning_stats', 'timings']) {
    const want = obj(rec[f]);
    const got = row[f] === null ? null : Object.fromEntries(Object.entries(row[f]).map(([k, v]) => [k, num(v)]));
    if (want === null ? got !== null : Object.entries(got).some(([k, v]) => v !== (want[k] ?? (typeof v === 'boolean' ? false : 0)))) {
      problem(`${where}: ${f} ${JSON.stringify(got)}, JSONL ${JSON.stringify(rec[f])}`);
    }
  }
  const tools = Array.isArray(rec.toolsets_used) ? rec.toolsets_used : null;
  if (tools === null ? row.toolsets_used !== null : !same(row.toolsets_used, tools.map((t) => (typeof t === 'string' ? t : JSON.stringify(t))))) {
    problem(`${where}: toolsets_used ${JSON.stringify(row.toolsets_used)}, JSONL ${JSON.stringify(rec.toolsets_used)}`);
  }
  for (const f of ['tool_stats', 'tool_error_counts', 'metadata', 'extra']) {
    const present = rec[f] !== undefined && rec[f] !== null && (f === 'metadata' || obj(rec[f]) !== null);
    if (!present ? row[f] !== null : row[f] === null || !same(JSON.parse(row[f]), rec[f])) {
      problem(`${where}: ${f} ${row[f]}, JSONL ${JSON.stringify(rec[f])}`);
    }
  }
  checkGraded(where, row, rec);
  compared++;
}
if (rows.length !== byKey.size) problem(`${rows.length} rows, JSONL has ${byKey.size} records`);

process.stdout.write(JSON.stringify({ rows: rows.length, compared, problems }) + '\n');
process.exitCode = problems.length > 0 ? 1 : 0;
