// Deterministic request bodies for the benchmark (seeded PRNG: the same bytes on every machine).
//
// Every trace id carries a fixed-width slot (ID_WIDTH characters) that the load
// generator overwrites in place with a counter before each request, so every
// request carries new (trace, span) ids while the body keeps its exact length.
// Without it, the store's deduplication on (org_id, trace_id, span_id) would
// collapse repeated bodies and the end-to-end count could not tell a lost span
// from a duplicate. See README.md, "Counting spans".

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ID_WIDTH = 12;
const SLOT = '@'.repeat(ID_WIDTH);
const MAX_BODY_BYTES = 10 * 1024 * 1024;

export function prng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = 'the model answered with a short summary of the tool results and a plan for the next step'.split(' ');
export const MODELS = [
  ['openai', 'gpt-4o'],
  ['openai', 'gpt-4o-mini'],
  ['anthropic', 'claude-sonnet-4-20250514'],
  ['google', 'gemini-2.5-pro'],
  ['mistral', 'mistral-large-latest'],
];

function text(rand, chars) {
  let out = '';
  while (out.length < chars) out += WORDS[Math.floor(rand() * WORDS.length)] + ' ';
  out = out.slice(0, chars);
  // 5% of texts carry a non-ASCII character, which makes decoding measurably slower.
  return rand() < 0.05 ? out.slice(0, -1) + 'é' : out;
}

/**
 * The UTC day before the run's: inside the server's default text retention (TEXT_RETENTION_DAYS, 30), so a span's
 * texts are stored as a live client's are. A fixed date that fell out of it had the server write every span without
 * its texts.
 */
const FIXED_DAY = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000;

/** `startAt`: every span starts in the minute before it (a busy day's shape); otherwise on one fixed day. */
function span(rand, i, textChars, startAt) {
  const [provider, modelId] = MODELS[Math.floor(rand() * MODELS.length)];
  const start = startAt === undefined ? FIXED_DAY + Math.floor(rand() * 86_400_000) : startAt - 60_000 + Math.floor(rand() * 55_000);
  return {
    spanId: `s${i}`,
    ...(i > 0 ? { parentSpanId: 's0' } : {}),
    spanType: i === 0 ? 'agent' : 'llm',
    name: `step-${i}`,
    startTime: start,
    endTime: start + Math.floor(rand() * 5000),
    provider,
    modelId,
    usage: { inputTokens: Math.floor(rand() * 5000), cachedInputTokens: Math.floor(rand() * 1000), outputTokens: Math.floor(rand() * 800) },
    input: text(rand, textChars),
    output: text(rand, textChars),
    metadata: { env: 'bench', region: 'eu' },
  };
}

function template(seed, traces, spans, textChars, startAt) {
  const rand = prng(seed);
  const json = JSON.stringify({
    version: 'v1',
    traces: Array.from({ length: traces }, (_, t) => ({
      traceId: `${SLOT}-${t}`,
      traceName: 'bench',
      customer: { id: `cust-${Math.floor(rand() * 50)}` },
      spans: Array.from({ length: spans }, (_, i) => span(rand, i, textChars, startAt)),
    })),
  });
  const body = Buffer.from(json, 'utf8');
  if (body.length > MAX_BODY_BYTES) throw new Error(`workload body of ${body.length} bytes exceeds the 10 MiB limit`);
  const slots = [];
  for (let at = body.indexOf(SLOT); at >= 0; at = body.indexOf(SLOT, at + ID_WIDTH)) slots.push(at);
  return { body, slots, spans: traces * spans };
}

let otlpType;
/** ExportTraceServiceRequest from the server's vendored opentelemetry-proto files (protobufjs, as the server uses). */
function otlpRequestType() {
  if (otlpType === undefined) {
    const protobuf = createRequire(import.meta.url)('protobufjs');
    const dir = fileURLToPath(new URL('../packages/server/proto', import.meta.url));
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => path.join(dir, target);
    root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto');
    otlpType = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
  }
  return otlpType;
}

const str = (key, v) => ({ key, value: { stringValue: v } });
const int = (key, v) => ({ key, value: { intValue: v } });

/**
 * The same traces and spans as `small`'s v1 body (same seed, same texts and
 * counts), as an OTLP/HTTP protobuf request with GenAI attributes: input
 * tokens include the cached ones, as the conventions count them. A trace id
 * is 4 bytes of trace number and a 12-byte id slot, stamped like the v1 ids.
 */
function otlpTemplate(seed, traces, spans, textChars) {
  const rand = prng(seed);
  const slot = Buffer.from(SLOT, 'latin1');
  const resourceSpans = Array.from({ length: traces }, (_, t) => {
    const customer = `cust-${Math.floor(rand() * 50)}`;
    const traceId = Buffer.concat([Buffer.from([0, 0, t >> 8, t & 255]), slot]);
    const list = Array.from({ length: spans }, (_, i) => {
      const s = span(rand, i, textChars);
      const u = s.usage;
      return {
        traceId,
        spanId: Buffer.from([0, 0, 0, 0, 0, 0, 1, i]),
        ...(i > 0 ? { parentSpanId: Buffer.from([0, 0, 0, 0, 0, 0, 1, 0]) } : {}),
        name: s.name,
        kind: 3,
        startTimeUnixNano: `${s.startTime}000000`,
        endTimeUnixNano: `${s.endTime}000000`,
        attributes: [
          str('gen_ai.operation.name', i === 0 ? 'invoke_agent' : 'chat'),
          str('gen_ai.provider.name', s.provider),
          str('gen_ai.request.model', s.modelId),
          int('gen_ai.usage.input_tokens', u.inputTokens + u.cachedInputTokens),
          int('gen_ai.usage.cache_read.input_tokens', u.cachedInputTokens),
          int('gen_ai.usage.output_tokens', u.outputTokens),
          str('gen_ai.input.messages', s.input),
          str('gen_ai.output.messages', s.output),
          str('enduser.id', customer),
        ],
      };
    });
    return {
      resource: { attributes: [str('service.name', 'bench'), str('env', 'bench'), str('region', 'eu')] },
      scopeSpans: [{ scope: { name: 'bench' }, spans: list }],
    };
  });
  const type = otlpRequestType();
  const body = Buffer.from(type.encode(type.fromObject({ resourceSpans })).finish());
  const slots = [];
  for (let at = body.indexOf(slot); at >= 0; at = body.indexOf(slot, at + ID_WIDTH)) slots.push(at);
  if (slots.length !== traces * spans) throw new Error(`otlp workload: found ${slots.length} id slots for ${traces * spans} spans`);
  return { body, slots, spans: traces * spans, path: '/v1/traces', contentType: 'application/x-protobuf' };
}

const SPECS = {
  // 1 span per request: per-request overhead (auth, routing, group commit).
  tiny: [1, 1, 1, 40],
  // 10 traces × 10 spans, ~300-character texts: ~100 KB.
  small: [2, 10, 10, 340],
  // The same spans as `small` as an OTLP/HTTP protobuf request to /v1/traces.
  otlp: [2, 10, 10, 340],
  // The same request as `otlp`, as the message of an OTLP/gRPC TraceService/Export call.
  grpc: [2, 10, 10, 340],
  // 20 traces × 50 spans, ~2 KB input and output texts: ~4.5 MB.
  large: [3, 20, 50, 2000],
  // 45 traces × 100 spans, ~1 KB texts: ~9.6 MB, just under the 10 MiB body limit.
  max: [4, 45, 100, 1000],
};
export const WORKLOAD_NAMES = Object.keys(SPECS);

const cache = new Map();
/**
 * name → { body: Buffer (id slots still blank), slots: byte offsets of the id slots, spans per request, path, contentType,
 * grpc: sent as OTLP/gRPC calls rather than HTTP requests (the floors still read the same bytes over HTTP) }
 */
export function workload(name, { startAt } = {}) {
  const spec = SPECS[name];
  if (!spec) throw new Error(`unknown workload "${name}" (known: ${WORKLOAD_NAMES.join(', ')})`);
  if (startAt !== undefined && (name === 'otlp' || name === 'grpc')) throw new Error(`workload "${name}" has no startAt`);
  const key = startAt === undefined ? name : `${name}@${startAt}`;
  if (!cache.has(key)) {
    const t = name === 'otlp' || name === 'grpc' ? otlpTemplate(...spec) : { ...template(...spec, startAt), path: '/ingest', contentType: 'application/json' };
    cache.set(key, { ...t, grpc: name === 'grpc' });
  }
  return cache.get(key);
}

/** Writes request number `n` into every id slot of `body`, in place: ids `<n base 36, zero-padded>-<trace>`. */
export function stamp(body, slots, n) {
  const id = n.toString(36).padStart(ID_WIDTH, '0');
  if (id.length > ID_WIDTH) throw new Error('request counter overflowed the id slot');
  for (const at of slots) body.write(id, at, ID_WIDTH, 'latin1');
  return body;
}
