#!/usr/bin/env node
// Token counting throughput, side by side: npm tiktoken (the WASM build of
// OpenAI's tiktoken) against stages/tokenizer, both pinned to one core
// (taskset -c 0; GOMAXPROCS=1 for Go), on the same deterministic mixed text
// (English prose, code, CJK; about 45/35/20 % of the bytes). It checks that
// the per-document token counts are identical and prints MB/s and the ratio,
// by wall time and by CPU time (user+system of the process during the best
// pass; on a machine shared with other work the CPU-time ratio is the figure
// to quote, wall time there also counts time spent waiting for the core).
//
// Usage: node scripts/bench-tokens.mjs [--mb 100] [--encoding cl100k_base]
//        [--repeat 1] [--file PATH] [--tiktoken-go-mb 5]
//
// The text is written once to $TMPDIR/hermes-bench-tokens-<mb>mb.txt
// (documents of 1–64 KB separated by U+001E) and reused while it exists.
// --tiktoken-go-mb N also times github.com/pkoukk/tiktoken-go on the first
// N MB, for comparison (0 skips it).

import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { refRequire, mulberry32 } from './tokenizer-golden.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');
const SEP = '\x1e';

function arg(name, def) {
  const i = process.argv.indexOf('--' + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}

// ---------------------------------------------------------------- generator

const WORDS = ('the of and to in a is that for it as was with be by on not he I this are or his from at which but have an they you were her she there been one all we their has would when if so no will can more other into what some could them time than only about its may these two then do first any my now such like our over man me even most made after also did many before must through years where much your way well down should because each just those how too little good very make world still own see men work long here get both between life being under never day same another know while last us might great old year off come since against go came right used take three states himself few house use during without again place around however home small found thought went say part once general high upon school every don\'t does got united left number course war until always away something fact though water less public put think almost hand enough far took head yet government system better set told nothing night end why called didn\'t eyes find going look asked later knew point next program city business give group toward young days let room president side social given present several order national possible rather second face per among form important often things looking early white case john become large big need four within felt along children saw best church ever least power development light thought family interest want members mind country area others done turned although open god service certain kind problem began different door thus help sense means whole matter perhaps itself york it\'s times law human line above name example action company hands local show whether five history gave today either act feet across taken past quite anyone having seen death experience body word half really field am car words already themselves i\'m information tell together college shall money period held keep sure probably free seems real behind cannot miss political air question making office brought whose special heard major problems ago became federal moment study available known result street economic boy position reason change south board individual job society areas west close turn love community true court force full seem am').split(' ');
const IDENT = ['config', 'value', 'result', 'err', 'ctx', 'items', 'index', 'buffer', 'handler', 'request', 'response', 'client', 'server', 'token', 'count', 'parse', 'render', 'update', 'user_id', 'maxRetries', 'HTTPClient', 'getValue', 'setOptions', 'node', 'tree', 'data', 'payload', 'path', 'file', 'line'];
const CJK = '的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从知使全长果明问意已相反高现实部力量样资加开政动把比体机内立手理最性电想知道题很间并教化或西位向正外本变制机于重表解问候原产品记务设新觉各然数没何特利信已近结路气象意总通况报其保系打话做世提告话流结感将条应';
const KANA = 'あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノ';

function english(rnd) {
  const n = 5 + Math.floor(rnd() * 25);
  let s = '';
  for (let i = 0; i < n; i++) {
    let w = WORDS[Math.floor(rnd() * WORDS.length)];
    if (i === 0 || rnd() < 0.05) w = w[0].toUpperCase() + w.slice(1);
    if (rnd() < 0.03) w = String(Math.floor(rnd() * 100000));
    s += (i ? ' ' : '') + w;
    if (rnd() < 0.08) s += ',';
  }
  return s + ['.', '.', '.', '?', '!', ':'][Math.floor(rnd() * 6)];
}

function code(rnd) {
  const id = () => IDENT[Math.floor(rnd() * IDENT.length)];
  const num = () => Math.floor(rnd() * 1000);
  const t = [
    () => `func ${id()}(${id()} int, ${id()} string) (*${id()}, error) {\n\tif ${id()} == nil {\n\t\treturn nil, fmt.Errorf("${id()}: %w", err)\n\t}\n\tfor i := 0; i < ${num()}; i++ {\n\t\t${id()}[i] += ${num()}\n\t}\n\treturn &${id()}{}, nil\n}\n`,
    () => `def ${id()}(self, ${id()}=None, **kwargs):\n    """Return the ${id()} of ${id()}."""\n    if ${id()} is None:\n        ${id()} = [x * ${num()} for x in range(${num()})]\n    return {"${id()}": ${id()}, "${id()}": ${num()}}\n\n`,
    () => `{"${id()}": "${id()}-${num()}", "${id()}": [${num()}, ${num()}, ${num()}], "${id()}": {"${id()}": true, "${id()}": null}}\n`,
    () => `const ${id()} = await fetch(\`/api/v1/${id()}/\${${id()}}\`, { method: 'POST', body: JSON.stringify(${id()}) });\n`,
    () => `$ grep -rn "${id()}" ./src | awk '{print $1}' | sort | uniq -c > /tmp/${id()}.txt\n`,
    () => `    <div class="${id()}-${num()}"><span>{{ ${id()}.${id()} }}</span></div>\n`,
  ];
  return t[Math.floor(rnd() * t.length)]();
}

function cjk(rnd) {
  const n = 8 + Math.floor(rnd() * 40);
  let s = '';
  const alpha = rnd() < 0.8 ? CJK : KANA + CJK.slice(0, 100);
  for (let i = 0; i < n; i++) {
    s += alpha[Math.floor(rnd() * alpha.length)];
    if (rnd() < 0.07) s += '，';
  }
  if (rnd() < 0.1) s += String(Math.floor(rnd() * 2025));
  return s + (rnd() < 0.8 ? '。' : '！');
}

// generate writes about mb megabytes of documents to file.
function generate(file, mb) {
  const rnd = mulberry32(20241129);
  const target = mb * 1e6;
  const fd = fs.openSync(file + '.tmp', 'w');
  let written = 0;
  let first = true;
  while (written < target) {
    const docSize = 1000 + Math.floor(rnd() * 63000);
    const r = rnd();
    const kind = r < 0.45 ? english : r < 0.8 ? code : cjk;
    let doc = '';
    while (Buffer.byteLength(doc) < docSize) {
      doc += kind(rnd);
      doc += kind === code ? '' : rnd() < 0.2 ? '\n\n' : ' ';
      if (rnd() < 0.05) doc += '  \t ';
    }
    const chunk = (first ? '' : SEP) + doc;
    first = false;
    written += fs.writeSync(fd, chunk);
  }
  fs.closeSync(fd);
  fs.renameSync(file + '.tmp', file);
}

// fnvCounts hashes per-document counts exactly like BenchmarkCountFile.
function fnvCounts(counts) {
  let h = 0xcbf29ce484222325n;
  const p = 0x100000001b3n;
  const mask = (1n << 64n) - 1n;
  for (const n of counts) {
    let v = BigInt(n);
    for (let k = 0; k < 8; k++) {
      h ^= v & 0xffn;
      h = (h * p) & mask;
      v >>= 8n;
    }
  }
  return h.toString(16).padStart(16, '0');
}

// measureJS runs in the child pinned to core 0.
function measureJS(file, encoding, repeat) {
  const req = refRequire();
  const { get_encoding } = req('tiktoken');
  const enc = get_encoding(encoding);
  const text = fs.readFileSync(file, 'utf8');
  const bytes = fs.statSync(file).size;
  const docs = text.split(SEP);
  let best = Infinity;
  let bestCPU = Infinity;
  let counts;
  for (let r = 0; r < repeat; r++) {
    counts = new Array(docs.length);
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    for (let i = 0; i < docs.length; i++) counts[i] = enc.encode_ordinary(docs[i]).length;
    const c = process.cpuUsage(c0);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
    bestCPU = Math.min(bestCPU, (c.user + c.system) / 1e6);
  }
  const total = counts.reduce((a, b) => a + b, 0);
  console.log(`BENCH_RESULT impl=npm-tiktoken encoding=${encoding} bytes=${bytes} docs=${docs.length} tokens=${total} hash=${fnvCounts(counts)} seconds=${best.toFixed(3)} mbps=${(bytes / 1e6 / best).toFixed(2)} cpu_seconds=${bestCPU.toFixed(3)} cpu_mbps=${(bytes / 1e6 / bestCPU).toFixed(2)}`);
}

function parseResult(out) {
  const line = out.split('\n').find((l) => l.startsWith('BENCH_RESULT'));
  if (!line) throw new Error('no BENCH_RESULT in output:\n' + out);
  return Object.fromEntries(line.split(' ').slice(1).map((kv) => kv.split('=')));
}

function pinned(cmd, args, env) {
  const hasTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
  const [c, a] = hasTaskset ? ['taskset', ['-c', '0', cmd, ...args]] : [cmd, args];
  if (!hasTaskset) console.error('warning: taskset not available, not pinned to one core');
  const r = spawnSync(c, a, { env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

async function main() {
  if (process.argv.includes('--measure-js')) {
    measureJS(arg('file'), arg('encoding', 'cl100k_base'), Number(arg('repeat', '1')));
    return;
  }
  const mb = Number(arg('mb', '100'));
  const encoding = arg('encoding', 'cl100k_base');
  const repeat = arg('repeat', '1');
  const file = arg('file', path.join(os.tmpdir(), `hermes-bench-tokens-${mb}mb.txt`));
  const tgoMB = Number(arg('tiktoken-go-mb', '5'));
  refRequire(); // install the reference before timing anything
  if (!fs.existsSync(file)) {
    console.log(`generating ${mb} MB of mixed text in ${file}`);
    generate(file, mb);
  }
  const bin = path.join(os.tmpdir(), 'hermes-tokenizer-bench.test');
  execFileSync('go', ['test', '-c', '-o', bin, './stages/tokenizer/'], { cwd: repo, stdio: 'inherit' });

  console.log(`npm tiktoken ${encoding}, one core ...`);
  const js = parseResult(pinned(process.execPath, [fileURLToPath(import.meta.url), '--measure-js', '--file', file, '--encoding', encoding, '--repeat', repeat], {}));
  console.log(`stages/tokenizer ${encoding}, one core ...`);
  const goEnv = { GOMAXPROCS: '1', TOKENIZER_BENCH_FILE: file, TOKENIZER_BENCH_ENCODING: encoding, TOKENIZER_BENCH_REPEAT: repeat };
  const go = parseResult(pinned(bin, ['-test.run', '^$', '-test.bench', '^BenchmarkCountFile$', '-test.benchtime', '1x'], goEnv));

  let tgo = null;
  if (tgoMB > 0 && encoding === 'cl100k_base') {
    // tiktoken-go on a prefix of the same documents (it is slow).
    const sub = file + `.first${tgoMB}mb`;
    if (!fs.existsSync(sub)) {
      const docs = fs.readFileSync(file, 'utf8').split(SEP);
      let acc = [];
      let size = 0;
      for (const d of docs) {
        if (size >= tgoMB * 1e6) break;
        acc.push(d);
        size += Buffer.byteLength(d) + 1;
      }
      fs.writeFileSync(sub, acc.join(SEP));
    }
    console.log(`github.com/pkoukk/tiktoken-go on the first ${tgoMB} MB, one core ...`);
    tgo = parseResult(pinned(bin, ['-test.run', '^$', '-test.bench', '^BenchmarkTiktokenGoFile$', '-test.benchtime', '1x'], { ...goEnv, TOKENIZER_BENCH_FILE: sub }));
  }

  const row = (r) => `${r.impl.padEnd(14)} ${(r.mbps + ' MB/s').padStart(14)} ${(r.cpu_mbps + ' MB/s').padStart(14)} ${String(r.tokens).padStart(12)} tokens  ${r.seconds}s wall  ${r.cpu_seconds}s cpu  hash ${r.hash}`;
  console.log('\nimpl             wall MB/s       CPU MB/s       tokens');
  console.log(row(js));
  console.log(row(go));
  if (tgo) console.log(row(tgo) + `  (first ${tgoMB} MB only)`);
  const same = js.tokens === go.tokens && js.hash === go.hash && js.docs === go.docs;
  console.log(`\ncounts identical: ${same ? 'yes' : 'NO'} (${go.docs} documents, ${(Number(go.bytes) / 1e6).toFixed(1)} MB)`);
  console.log(`ratio go / npm tiktoken by wall time: ${(Number(go.mbps) / Number(js.mbps)).toFixed(2)}x`);
  console.log(`ratio go / npm tiktoken by CPU time:  ${(Number(go.cpu_mbps) / Number(js.cpu_mbps)).toFixed(2)}x`);
  if (!same) process.exit(1);
}

await main();
