// µs per span of each step of the request path, in process, on the benchmark's own bodies:
// what the server does to a body between reading it and handing it to the write log.
// No HTTP, no disk: the figures are CPU time on one thread, and far steadier than a
// load test on a shared machine. Medians of 7 rounds; each round runs every step on
// every body of the round, interleaved, so a noisy neighbour hits all steps alike.
//
//   npx tsc -b && node bench/pipeline.js [workloads, default small,large,max] [--rounds 7]
//
// Steps (cumulative, as in packages/server/src/pipeline.ts, ingest.ts and otlp.ts):
//   parse     the nesting guard, UTF-8 decode and JSON.parse (the floor any JSON ingest pays);
//             for the `otlp` workload: protobuf decode and the GenAI mapping onto v1 traces
//   validate  ajv's compiled validator (zod only explains failures)
//   price     the price engine, per span
//   encode    the canonical lines (encodeTraceHead/encodeSpanLine)
//   bytes     the lines as one NDJSON Buffer (toNdjson), and its crc32 (what the write log appends)
//   5rules    bytes, with an org content policy of 5 redaction rules (email, card, api-key and two of the org's own)
//   notext    bytes, with the content policy `record: no-text`
import { crc32 } from 'node:zlib';
import { exceedsDepth, MAX_JSON_DEPTH } from '../packages/server/dist/json-depth.js';
import { PriceEngine } from '../packages/shared/dist/price-engine.js';
import { toNdjson } from '../packages/server/dist/pipeline.js';
import { encodeSpanLine, encodeTraceHead } from '../packages/shared/dist/rows.js';
import { validateIngest } from '../packages/shared/dist/validate.js';
import { mapExportRequest } from '../packages/shared/dist/otlp-genai.js';
import { OtlpCodec } from '../packages/server/dist/otlp-codec.js';
import { compileContentPolicy, validateContentPolicy } from '../packages/shared/dist/content-policy.js';
import { stamp, workload, WORKLOAD_NAMES } from './workloads.js';

const args = process.argv.slice(2);
const roundsAt = args.indexOf('--rounds');
const ROUNDS = roundsAt >= 0 ? Number(args[roundsAt + 1]) : 7;
const names = (args.find((a, i) => !a.startsWith('--') && i !== roundsAt + 1) ?? 'small,otlp,large,max').split(',');
for (const n of names) if (!WORKLOAD_NAMES.includes(n)) throw new Error(`unknown workload "${n}" (known: ${WORKLOAD_NAMES.join(', ')})`);

const engine = await PriceEngine.create({});
const ctx = { orgId: 'org_bench', keyPrefix: 'ti_bench', receivedAt: Date.now() };
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const codec = new OtlpCodec();
let otlp = false;

/** Bytes to v1 traces: JSON.parse for /ingest; protobuf decode and mapping for /v1/traces. */
function parse(body) {
  if (otlp) return { version: 'v1', traces: mapExportRequest(codec.decodeRequest(body, 'protobuf')).traces };
  if (exceedsDepth(body, MAX_JSON_DEPTH)) throw new Error('too deep');
  return JSON.parse(body.toString('utf8'));
}

function encode(payload) {
  const lines = [];
  for (const trace of payload.traces) {
    const head = encodeTraceHead(trace, ctx);
    for (const span of trace.spans) lines.push(encodeSpanLine(head, span, engine.price(span, ctx.orgId)));
  }
  return lines;
}

const FIVE_RULES = compileContentPolicy(
  validateContentPolicy({
    rules: ['email', 'card', 'api-key'],
    custom: [
      { pattern: 'acct-[0-9]{6,}', replacement: '[account]' },
      { pattern: '(?:password|passwd|pwd)\\s*[:=]\\s*\\S+', flags: 'i', replacement: '[password]' },
    ],
  }),
);
const NO_TEXT = compileContentPolicy({ record: 'no-text', rules: [], custom: [] });

/** The bytes step with an org content policy applied to each trace first (pipeline.ts encodeTraces). */
function withPolicy(policy) {
  return (body) => {
    const p = parse(body);
    validateIngest(p);
    const buf = toNdjson(encode({ traces: p.traces.map((t) => policy.apply(t)) }));
    return crc32(buf) + buf.length;
  };
}

const STEPS = {
  parse: (body) => parse(body),
  validate: (body) => validateIngest(parse(body)),
  price: (body) => {
    const p = parse(body);
    validateIngest(p);
    let n = 0;
    for (const t of p.traces) for (const s of t.spans) n += engine.price(s, ctx.orgId).total_cost.length;
    return n;
  },
  encode: (body) => {
    const p = parse(body);
    validateIngest(p);
    return encode(p);
  },
  bytes: (body) => {
    const p = parse(body);
    validateIngest(p);
    const buf = toNdjson(encode(p));
    return crc32(buf) + buf.length;
  },
  '5rules': withPolicy(FIVE_RULES),
  notext: withPolicy(NO_TEXT),
};
const STEP_COUNT = Object.keys(STEPS).length;

console.log(`pipeline: µs per span on one thread, cumulative steps, median of ${ROUNDS} rounds (node ${process.version})`);
console.log(
  ['workload', ...Object.keys(STEPS), 'encoded B/span', 'body B/span'].map((h, i) => (i === 0 ? h.padEnd(9) : h.padStart(i > STEP_COUNT ? 15 : 9))).join(''),
);
for (const name of names) {
  const w = workload(name);
  otlp = name === 'otlp';
  // About 2 MB of bodies per step per round, at least 2 bodies.
  const count = Math.max(2, Math.ceil(2e6 / w.body.length));
  const bodies = Array.from({ length: count }, (_, i) => Buffer.from(stamp(Buffer.from(w.body), w.slots, i)));
  const spans = count * w.spans;
  const times = Object.fromEntries(Object.keys(STEPS).map((k) => [k, []]));
  let sink = 0;
  for (let r = 0; r <= ROUNDS; r++) {
    for (const [k, step] of Object.entries(STEPS)) {
      const t0 = process.hrtime.bigint();
      for (const b of bodies) sink += step(b) === undefined ? 0 : 1;
      const us = Number(process.hrtime.bigint() - t0) / 1000 / spans;
      if (r > 0) times[k].push(us); // round 0 warms the JIT
    }
  }
  const encodedBytes = toNdjson(encode(parse(bodies[0]))).length / w.spans;
  const cells = Object.keys(STEPS).map((k) => median(times[k]).toFixed(2).padStart(9));
  console.log(`${name.padEnd(9)}${cells.join('')}${encodedBytes.toFixed(0).padStart(15)}${(w.body.length / w.spans).toFixed(0).padStart(15)}`);
  if (sink < 0) console.log(sink);
}
