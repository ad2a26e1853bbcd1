#!/usr/bin/env node
/**
 * Mutation fuzzing of POST /ingest through the real server binary.
 *
 *   npm run fuzz -- [--count 100000] [--seconds 600] [--concurrency 16] [--seed N] [--json]
 *
 * Starts `packages/server/bin/trace-ingest-server.js` (the built dist: run
 * `npx tsc -b` first) over a temp DATA_DIR, creates the org and key with the
 * CLI, replays the seed corpus in test/fuzz/corpus/ and then sends mutated
 * raw bodies until --count bodies or --seconds have gone by. Every answer
 * must be JSON and below 500, and the process must stay up; a canary batch
 * checks now and then that no payload polluted a prototype.
 *
 * Exit code: 0 when crashes, 5xx answers and non-JSON answers are all 0;
 * 1 otherwise; 2 when the server could not be started.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import zlib from 'node:zlib';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SERVER_BIN = path.join(ROOT, 'packages/server/bin/trace-ingest-server.js');
const CLI_BIN = path.join(ROOT, 'packages/cli/bin/trace-ingest.js');
const CORPUS_DIR = fileURLToPath(new URL('./corpus/', import.meta.url));

const { values: opts } = parseArgs({
  options: {
    count: { type: 'string', default: '100000' },
    seconds: { type: 'string', default: '0' },
    concurrency: { type: 'string', default: '16' },
    seed: { type: 'string' },
    json: { type: 'boolean', default: false },
    'keep-data': { type: 'boolean', default: false },
  },
});
const COUNT = Number(opts.count);
const SECONDS = Number(opts.seconds);
const CONCURRENCY = Math.max(1, Number(opts.concurrency));
const SEED = opts.seed === undefined ? (Date.now() ^ (process.pid << 16)) >>> 0 : Number(opts.seed) >>> 0;
const say = (...a) => {
  if (!opts.json) console.log(...a);
};

// ---------------------------------------------------------------------------
// Seeded randomness, so a run can be repeated with --seed.
// ---------------------------------------------------------------------------

let state = SEED || 1;
function rand() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(rand() * n);
const pick = (xs) => xs[int(xs.length)];
const chance = (p) => rand() < p;

// ---------------------------------------------------------------------------
// Base payloads: valid v1 batches using every field, the seeds of mutation.
// ---------------------------------------------------------------------------

const WORDS = ['a', 'trace', 'llm', 'é', '😀', '\u0000', '"', '\\', '\n', '\u2028', ' ', 'x'.repeat(40)];
const word = () => Array.from({ length: 1 + int(4) }, () => pick(WORDS)).join('');

function baseSpan(i) {
  const start = 1_700_000_000_000 + int(1_000_000);
  const span = {
    spanId: `s${i}-${int(1e6)}`,
    spanType: pick(['agent', 'llm', 'tool', 'embedding', 'other']),
    name: word(),
    startTime: start,
    endTime: start + int(5000),
  };
  if (chance(0.5)) Object.assign(span, { parentSpanId: 'p', status: pick(['ok', 'error']), errorMessage: word(), provider: 'openai', modelId: 'gpt-4o' });
  if (chance(0.5))
    span.usage = {
      inputTokens: int(1000),
      outputTokens: int(1000),
      totalTokens: 5,
      reasoningTokens: 1,
      cachedInputTokens: 0,
      cacheWriteInputTokens: 0,
      imageCount: 0,
      webSearchCount: 0,
      requestCount: 1,
    };
  if (chance(0.4))
    Object.assign(span, {
      ttftMs: rand() * 100,
      chunkOffsets: [0, 5, 9],
      chunkTokens: [1, 2, 3],
      reasoningOffsets: [1],
      reasoningChunkTokens: [2],
      reasoningDurationMs: 3,
    });
  if (chance(0.4))
    Object.assign(span, { input: word(), output: word(), toolCatalog: '{}', modelCallMs: 4, systemFingerprint: 'fp', safetyMetadata: '[]', sources: '[]' });
  if (chance(0.3)) span.rateLimit = { requestsLimit: 1, requestsRemaining: 1, requestsResetMs: 1, tokensLimit: 1, tokensRemaining: 1, tokensResetMs: 1 };
  if (chance(0.3)) span.metadata = { k: word(), [word()]: 'v' };
  return span;
}

function baseTrace(i) {
  const trace = { traceId: `t${i}-${int(1e9)}`, traceName: word(), spans: Array.from({ length: 1 + int(3) }, (_, j) => baseSpan(j)) };
  if (chance(0.5)) Object.assign(trace, { agentName: word(), workflowName: 'wf', workflowRunId: 'run', sessionId: 'sess' });
  if (chance(0.4)) trace.customer = { id: 'c1', name: word(), imageUrl: 'https://example.com/a.png' };
  if (chance(0.4)) trace.metadata = { env: 'prod', [word()]: word() };
  return trace;
}

const basePayload = () => ({ version: 'v1', traces: Array.from({ length: 1 + int(3) }, (_, i) => baseTrace(i)) });

// ---------------------------------------------------------------------------
// Mutators. Each returns { name, body: Buffer, headers }.
// ---------------------------------------------------------------------------

const JSON_CT = { 'content-type': 'application/json' };
const utf8 = (s) => Buffer.from(s, 'utf8');

/** Every path in a JSON value, as arrays of keys. */
function paths(v, at = [], out = []) {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out));
  else if (v !== null && typeof v === 'object') for (const k of Object.keys(v)) paths(v[k], [...at, k], out);
  return out;
}
function setAt(root, at, value) {
  if (at.length === 0) return value;
  let o = root;
  for (const k of at.slice(0, -1)) o = o[k];
  o[at[at.length - 1]] = value;
  return root;
}
const WRONG = [null, true, false, 0, -1, 1.5, -0.5, '', 'x', [], {}, [1, 'a'], { a: 1 }, 1e308, -1e308, 2 ** 63, 'v1', '2024-01-01', [[[]]]];
const HUGE_NUMBERS = [
  '1e400',
  '-1e400',
  '-0',
  '-0.0',
  '9223372036854775808',
  '18446744073709551616',
  '1e-400',
  '123456789012345678901234567890',
  '0.1e1',
  '1E2',
  '9007199254740993',
  '4.9e-324',
  '1.7976931348623157e309',
];
const INVALID_UTF8 = [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xf4, 0x90, 0x80, 0x80], [0xfe, 0xff], [0x80]];
const PROTO_KEYS = [
  '"__proto__":{"polluted":"yes","version":"v1"}',
  '"constructor":{"prototype":{"polluted":"yes"}}',
  '"__proto__":null',
  '"prototype":{"x":1}',
  '"__proto__":"v1"',
  '"hasOwnProperty":1',
  '"toString":"x"',
];

/** Offsets just after `{` in a JSON text: places where a key can be inserted. */
function objectStarts(s) {
  const out = [];
  for (let i = 0; i < s.length; i++) if (s[i] === '{') out.push(i + 1);
  return out;
}
function insertAt(s, at, text) {
  return s.slice(0, at) + text + s.slice(at);
}

const mutators = [
  ['truncated', (s) => ({ body: utf8(s.slice(0, int(s.length))) })],
  [
    'byte-flip',
    (s) => {
      const b = utf8(s);
      for (let n = 1 + int(4); n > 0; n--) b[int(b.length)] = int(256);
      return { body: b };
    },
  ],
  [
    'byte-delete',
    (s) => {
      const b = utf8(s);
      const at = int(b.length);
      return { body: Buffer.concat([b.subarray(0, at), b.subarray(at + 1 + int(8))]) };
    },
  ],
  [
    'invalid-utf8',
    (s) => {
      const b = utf8(s);
      const q = b.indexOf(0x22, int(b.length)); // inside or next to a string
      const at = q < 0 ? int(b.length) : q + 1;
      return { body: Buffer.concat([b.subarray(0, at), Buffer.from(pick(INVALID_UTF8)), b.subarray(at)]) };
    },
  ],
  ['lone-surrogate', (s) => ({ body: utf8(s.replace(/"name":"/, `"name":"${pick(['\\ud800', '\\udfff', '\\ud83d', '\\ude00x', '\\ud800\\ud800'])}`)) })],
  [
    'huge-number',
    (s) => {
      const nums = [...s.matchAll(/:(-?\d+(\.\d+)?)/g)];
      if (nums.length === 0) return { body: utf8(s) };
      const m = pick(nums);
      return { body: utf8(s.slice(0, m.index + 1) + pick(HUGE_NUMBERS) + s.slice(m.index + 1 + m[1].length)) };
    },
  ],
  [
    'duplicate-key',
    (s) => {
      const dup = pick(['"version":"v2",', '"version":"v1",', '"traces":[],', '"traces":null,', '"spanId":"dup",', '"startTime":-5,', '"traceName":1,']);
      return { body: utf8(insertAt(s, pick(objectStarts(s)), dup)) };
    },
  ],
  ['proto-key', (s) => ({ body: utf8(insertAt(s, pick(objectStarts(s)), pick(PROTO_KEYS) + ',')) })],
  ['proto-metadata', (s) => ({ body: utf8(s.replace(/"spanType"/, '"metadata":{"__proto__":"x","constructor":"y","prototype":"z"},"spanType"')) })],
  [
    'deep-nesting',
    () => {
      const depth = pick([100, 1000, 10_000, 100_000, 1_000_000]);
      const open = pick(['[', '{"a":']);
      const close = open === '[' ? ']' : '}';
      const inner = open.repeat(depth) + '1' + close.repeat(chance(0.8) ? depth : int(depth));
      return {
        body: utf8(
          pick([
            inner,
            `{"version":"v1","traces":${inner}}`,
            `{"version":"v1","traces":[{"traceId":"t","traceName":"n","metadata":{"k":${inner}},"spans":[]}]}`,
          ]),
        ),
      };
    },
  ],
  [
    'long-string',
    (s) => {
      const n = pick([10_000, 100_000, 1_000_001, 3_000_000]);
      const ch = pick(['a', 'é', '😀', '\\u0000', '\\\\']);
      const long = ch.repeat(ch.length > 1 && ch.startsWith('\\') ? Math.floor(n / 2) : n);
      const field = pick(['name', 'traceId', 'input', 'spanId', 'errorMessage']);
      return { body: utf8(s.replace(new RegExp(`"${field}":"[^"]*"`), `"${field}":"${long}"`)) };
    },
  ],
  ['long-key', (s) => ({ body: utf8(insertAt(s, pick(objectStarts(s)), `"${'k'.repeat(pick([1000, 100_000]))}":1,`)) })],
  [
    'wrong-type',
    (s) => {
      const v = JSON.parse(s);
      const all = paths(v);
      const at = pick(all);
      return { body: utf8(JSON.stringify(setAt(v, at, pick(WRONG)))) };
    },
  ],
  [
    'remove-field',
    (s) => {
      const v = JSON.parse(s);
      const at = pick(paths(v).filter((p) => p.length > 0 && typeof p[p.length - 1] === 'string'));
      if (at === undefined) return { body: utf8(s) };
      let o = v;
      for (const k of at.slice(0, -1)) o = o[k];
      delete o[at[at.length - 1]];
      return { body: utf8(JSON.stringify(v)) };
    },
  ],
  [
    'nul-bytes',
    (s) => {
      const b = utf8(s);
      const at = int(b.length);
      return { body: Buffer.concat([b.subarray(0, at), Buffer.alloc(1 + int(3)), b.subarray(at)]) };
    },
  ],
  ['nul-escape', (s) => ({ body: utf8(s.replace(/"traceId":"/, '"traceId":"\\u0000')) })],
  [
    'json-scalar',
    () => ({
      body: utf8(
        pick([
          '',
          ' ',
          'null',
          'true',
          '0',
          '-0',
          '1e400',
          '""',
          '[]',
          '{}',
          '[{}]',
          '"v1"',
          '\uFEFF{}',
          '{"version":"v1"}',
          '{"traces":[]}',
          'NaN',
          'Infinity',
          'undefined',
          "{'version':'v1'}",
          '{"version":"v1",}',
          '/* */{}',
        ]),
      ),
    }),
  ],
  [
    'content-type',
    (s) => ({
      body: utf8(s),
      headers: {
        'content-type': pick([
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/json; charset=utf-16',
          'application/json; charset=latin1',
          'APPLICATION/JSON',
          'application/jsonx',
          'application/vnd.api+json',
          'json',
          ';',
          ' application/json ',
          'application/json;;;',
          'application/' + 'j'.repeat(4000),
          '*/*',
        ]),
      },
    }),
  ],
  ['no-content-type', (s) => ({ body: utf8(s), headers: {} })],
  ['utf16-body', (s) => ({ body: Buffer.from((chance(0.5) ? '\uFEFF' : '') + s, 'utf16le') })],
  ['bom-prefix', (s) => ({ body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8(s)]) })],
  [
    'gzip-garbage',
    () => {
      const junk = Buffer.from(Array.from({ length: 1 + int(200) }, () => int(256)));
      return {
        body: chance(0.5) ? Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), junk]) : junk,
        headers: { ...JSON_CT, 'content-encoding': pick(['gzip', 'x-gzip', 'deflate', 'br']) },
      };
    },
  ],
  ['gzip-valid', (s) => ({ body: zlib.gzipSync(utf8(s)), headers: { ...JSON_CT, 'content-encoding': 'gzip' } })],
  [
    'gzip-truncated',
    (s) => {
      const z = zlib.gzipSync(utf8(s));
      return { body: z.subarray(0, int(z.length)), headers: { ...JSON_CT, 'content-encoding': 'gzip' } };
    },
  ],
  [
    'deflate-br-valid',
    (s) => {
      const br = chance(0.5);
      return { body: br ? zlib.brotliCompressSync(utf8(s)) : zlib.deflateSync(utf8(s)), headers: { ...JSON_CT, 'content-encoding': br ? 'br' : 'deflate' } };
    },
  ],
  [
    'gzip-bomb',
    () => {
      const mib = pick([11, 64]);
      if (!bombs.has(mib)) bombs.set(mib, zlib.gzipSync(Buffer.alloc(mib * 1024 * 1024, 0x20)));
      return { body: bombs.get(mib), headers: { ...JSON_CT, 'content-encoding': 'gzip' } };
    },
  ],
  ['gzip-of-gzip', (s) => ({ body: zlib.gzipSync(zlib.gzipSync(utf8(s))), headers: { ...JSON_CT, 'content-encoding': pick(['gzip', 'gzip, gzip']) } })],
  [
    'odd-encoding',
    (s) => ({
      body: utf8(s),
      headers: { ...JSON_CT, 'content-encoding': pick(['compress', 'zstd', 'identity', 'IDENTITY', ' gzip', 'gzip;q=1', '', 'chunked', 'x'.repeat(300)]) },
    }),
  ],
  ['oversized', () => ({ body: Buffer.alloc(10 * 1024 * 1024 + 1 + int(1000), 0x20) })],
  ['chunked', (s) => ({ body: utf8(s), chunked: true })],
  ['key-case', (s) => ({ body: utf8(s.replace(/"(version|traces|traceId|spans|spanId)"/, (_m, k) => `"${k.toUpperCase()}"`)) })],
  ['no-key', (s) => ({ body: utf8(s), auth: pick(['none', 'bad', 'both-bad', 'basic']) })],
];

// ---------------------------------------------------------------------------
// Corpus: small seed files replayed first on every run. The name picks the
// headers: *.gz / *.deflate / *.br are sent with that Content-Encoding,
// *.txt with Content-Type text/plain, anything else as application/json.
// ---------------------------------------------------------------------------

function corpus() {
  if (!fs.existsSync(CORPUS_DIR)) return [];
  return fs
    .readdirSync(CORPUS_DIR)
    .sort()
    .map((f) => {
      const body = fs.readFileSync(path.join(CORPUS_DIR, f));
      const headers = { ...JSON_CT };
      if (f.endsWith('.gz')) headers['content-encoding'] = 'gzip';
      else if (f.endsWith('.deflate')) headers['content-encoding'] = 'deflate';
      else if (f.endsWith('.br')) headers['content-encoding'] = 'br';
      else if (f.endsWith('.txt')) headers['content-type'] = 'text/plain';
      return { name: `corpus:${f}`, body, headers };
    });
}

/** Expensive mutators (megabytes per body) are drawn 20 times less often. */
const HEAVY = new Set(['oversized', 'gzip-bomb', 'long-string', 'deep-nesting']);
const bombs = new Map();

function nextCase(seeds) {
  let [name, mutate] = pick(mutators);
  while (HEAVY.has(name) && !chance(0.05)) [name, mutate] = pick(mutators);
  // Mostly fresh valid batches; sometimes a corpus entry that is valid JSON text.
  const seed = seeds.length > 0 && chance(0.1) ? pick(seeds) : JSON.stringify(basePayload());
  const m = mutate(seed);
  return { name, body: m.body, headers: m.headers ?? JSON_CT, chunked: m.chunked === true, auth: m.auth ?? 'bearer' };
}

// ---------------------------------------------------------------------------
// Server lifecycle.
// ---------------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function cli(dataDir, args) {
  return execFileSync(process.execPath, [CLI_BIN, ...args], { env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir }, encoding: 'utf8' });
}

function rssKb(pid) {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    if (m) return Number(m[1]);
  } catch {
    // not Linux: fall back to ps
  }
  try {
    return Number(execFileSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' }).trim());
  } catch {
    return NaN;
  }
}

async function startServer(dataDir) {
  const port = await freePort();
  const proc = spawn(process.execPath, [SERVER_BIN], {
    // memory durability: the subject is parsing, not fsync throughput.
    env: {
      PATH: process.env.PATH ?? '',
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
      INGEST_DURABILITY: 'memory',
      FLUSH_INTERVAL_MS: '1000',
      DRAIN_GRACE_MS: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (c) => {
    output += c.toString();
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const exit = { code: undefined, signal: undefined };
  proc.once('exit', (code, signal) => Object.assign(exit, { code, signal }));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exit.code !== undefined) throw new Error(`server exited during start (${exit.code}): ${output}`);
    try {
      if ((await fetch(`${base}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`server did not become ready: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, port, base, exit, output: () => output };
}

// ---------------------------------------------------------------------------
// Sending.
// ---------------------------------------------------------------------------

function send(port, agent, c, key) {
  return new Promise((resolve) => {
    const headers = { ...c.headers };
    if (c.auth === 'bearer') headers.authorization = `Bearer ${key}`;
    else if (c.auth === 'bad') headers.authorization = 'Bearer ti_' + 'A'.repeat(43);
    else if (c.auth === 'both-bad') Object.assign(headers, { authorization: `Bearer ${key}x`, 'x-api-key': key });
    else if (c.auth === 'basic') headers.authorization = `Basic ${Buffer.from(`user:${key}`).toString('base64')}`;
    if (!c.chunked) headers['content-length'] = String(c.body.length);
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/ingest', agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', (e) => resolve({ transport: e.code ?? e.message }));
    });
    req.setTimeout(60_000, () => req.destroy(new Error('client timeout')));
    req.on('error', (e) => resolve({ transport: e.code ?? e.message }));
    if (c.chunked) {
      const mid = int(c.body.length + 1);
      req.write(c.body.subarray(0, mid));
      req.end(c.body.subarray(mid));
    } else req.end(c.body);
  });
}

function isJsonAnswer(r) {
  if (!/^application\/json\b/i.test(r.type)) return false;
  try {
    const v = JSON.parse(r.body);
    if (r.status >= 400) return v !== null && typeof v === 'object' && typeof v.error === 'string';
    return v !== null && typeof v === 'object';
  } catch {
    return false;
  }
}

/** A batch with no `version`: answered 400 unless a prototype now carries one. */
const CANARY = JSON.stringify({
  traces: [{ traceId: 'canary', traceName: 'canary', spans: [{ spanId: 's', spanType: 'llm', name: 'n', startTime: 1, endTime: 2 }] }],
});

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-fuzz-'));
  let server;
  let key;
  try {
    cli(dataDir, ['plans', 'create', 'fuzz', '--monthly-spans', '1000000000000', '--rate-limit', '1000000']);
    cli(dataDir, ['orgs', 'create', 'fuzz', '--plan', 'fuzz']);
    key = JSON.parse(cli(dataDir, ['keys', 'create', '--org', 'fuzz', '--json'])).key;
    server = await startServer(dataDir);
  } catch (e) {
    console.error(`fuzz: could not start the server: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 2;
    return;
  }
  // Never leave the server behind, whatever happens below.
  process.once('exit', () => server.proc.kill('SIGKILL'));
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const stats = {
    seed: SEED,
    bodies: 0,
    corpus: 0,
    crashes: 0,
    status5xx: 0,
    nonJson: 0,
    polluted: 0,
    transportErrors: 0,
    statuses: {},
    byMutator: {},
    rssBeforeKb: 0,
    rssAfterKb: 0,
    seconds: 0,
    bodiesPerSecond: 0,
    serverAlive: false,
    examples: [],
  };
  const seeds = [];
  const cases = corpus();
  stats.corpus = cases.length;
  for (const c of cases) {
    const text = c.body.toString('utf8');
    try {
      const v = JSON.parse(text);
      // Only batch-shaped entries seed mutation (the deep ones are replayed only).
      if (c.headers['content-encoding'] === undefined && v !== null && typeof v === 'object' && Array.isArray(v.traces) && text.length < 10_000)
        seeds.push(text);
    } catch {
      // a corpus entry that is not JSON is replayed, not mutated
    }
  }

  // Warm up so "before" is the steady state, not the cold start.
  for (let i = 0; i < 50; i++)
    await send(server.port, agent, { body: utf8(JSON.stringify(basePayload())), headers: JSON_CT, chunked: false, auth: 'bearer' }, key);
  stats.rssBeforeKb = rssKb(server.proc.pid);

  const started = Date.now();
  const deadline = SECONDS > 0 ? started + SECONDS * 1000 : Infinity;
  let nextIndex = 0;
  const record = (name, c, r) => {
    stats.bodies++;
    const m = (stats.byMutator[name] ??= { sent: 0, statuses: {} });
    m.sent++;
    if (r.transport !== undefined) {
      // The server may close a connection after answering 413 while the body
      // is still being written; that is a reset, not a crash, if it stays up.
      stats.transportErrors++;
      m.statuses[r.transport] = (m.statuses[r.transport] ?? 0) + 1;
      return;
    }
    stats.statuses[r.status] = (stats.statuses[r.status] ?? 0) + 1;
    m.statuses[r.status] = (m.statuses[r.status] ?? 0) + 1;
    const bad = r.status >= 500 ? '5xx' : !isJsonAnswer(r) ? 'non-JSON' : undefined;
    if (r.status >= 500) stats.status5xx++;
    else if (bad !== undefined) stats.nonJson++;
    if (bad !== undefined && stats.examples.length < 20) {
      stats.examples.push({
        kind: bad,
        mutator: name,
        status: r.status,
        answer: r.body.slice(0, 300),
        body: c.body.subarray(0, 300).toString('base64'),
        headers: c.headers,
      });
    }
  };

  const worker = async () => {
    for (;;) {
      if (server.exit.code !== undefined) return;
      const i = nextIndex++;
      if (i >= cases.length + COUNT || Date.now() > deadline) return;
      const c = i < cases.length ? { ...cases[i], chunked: false, auth: 'bearer' } : nextCase(seeds);
      const r = await send(server.port, agent, c, key);
      record(c.name, c, r);
      if (i % 997 === 0) {
        const canary = await send(server.port, agent, { body: utf8(CANARY), headers: JSON_CT, chunked: false, auth: 'bearer' }, key);
        if (canary.status !== 400) {
          stats.polluted++;
          if (stats.examples.length < 20) stats.examples.push({ kind: 'polluted', status: canary.status, answer: canary.body?.slice(0, 300), after: c.name });
        }
      }
      if (!opts.json && stats.bodies % 10_000 === 0)
        say(`  ${stats.bodies} bodies, ${((Date.now() - started) / 1000).toFixed(0)} s, 5xx ${stats.status5xx}, non-JSON ${stats.nonJson}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, () => worker()));
  const elapsed = (Date.now() - started) / 1000;
  agent.destroy();

  stats.seconds = Math.round(elapsed * 10) / 10;
  stats.bodiesPerSecond = Math.round(stats.bodies / elapsed);
  if (server.exit.code === undefined) {
    stats.rssAfterKb = rssKb(server.proc.pid);
    try {
      stats.serverAlive = (await fetch(`${server.base}/healthz`)).ok;
    } catch {
      stats.serverAlive = false;
    }
  }
  if (server.exit.code !== undefined || !stats.serverAlive) {
    stats.crashes = 1;
    stats.examples.push({ kind: 'crash', exit: server.exit, output: server.output().slice(-2000) });
  }
  if (server.exit.code === undefined) {
    // The figures are taken; the data of a fuzz run is worth nothing, so skip the drain.
    server.proc.kill('SIGKILL');
    await new Promise((r) => server.proc.once('exit', r));
  }
  if (!opts['keep-data']) fs.rmSync(dataDir, { recursive: true, force: true });

  const failed = stats.crashes + stats.status5xx + stats.nonJson + stats.polluted > 0;
  if (opts.json) {
    process.stdout.write(JSON.stringify(stats) + '\n');
  } else {
    say(`fuzz seed ${stats.seed}: ${stats.bodies} bodies (${stats.corpus} from the corpus) in ${stats.seconds} s, ${stats.bodiesPerSecond} bodies/s`);
    say(
      `  crashes ${stats.crashes}, 5xx ${stats.status5xx}, non-JSON ${stats.nonJson}, prototype pollution ${stats.polluted}, ` +
        `transport resets ${stats.transportErrors}`,
    );
    say(`  statuses ${JSON.stringify(stats.statuses)}`);
    say(`  server RSS ${(stats.rssBeforeKb / 1024).toFixed(1)} MiB before, ${(stats.rssAfterKb / 1024).toFixed(1)} MiB after`);
    for (const e of stats.examples) say('  example:', JSON.stringify(e));
    say(failed ? 'FAIL' : 'OK');
  }
  process.exitCode = failed ? 1 : 0;
}

await main();
