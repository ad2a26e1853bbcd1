import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CATALOG_DIR } from './catalog.js';
import { PriceEngine, type PriceOverride } from './price-engine.js';
import type { Adoption } from './price-records.js';
import { completeRow, encodeLine, encodeRow, encodeSpanLine, encodeTraceHead, spanToRow, type SpanCosts } from './rows.js';
import type { Span, Trace, Usage } from './schema.js';

/**
 * The request path's output pinned byte for byte: generated batches (the
 * benchmark's shapes, and spans that reach every pricing and escaping rule)
 * priced and encoded, their lines and costs hashed. A change made for speed
 * must leave the digests as they are; only a deliberate change of the output
 * or of the shipped prices updates them.
 */

const DAY = 1767225600000;

function prng(seed: number): () => number {
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
const BENCH_MODELS = [
  ['openai', 'gpt-4o'],
  ['openai', 'gpt-4o-mini'],
  ['anthropic', 'claude-sonnet-4-20250514'],
  ['google', 'gemini-2.5-pro'],
  ['mistral', 'mistral-large-latest'],
] as const;

/** The benchmark's spans: five models, three usage buckets, plain texts of which 5% end in a non-ASCII letter. */
function benchTraces(seed: number, traces: number, spans: number, chars: number): Trace[] {
  const rand = prng(seed);
  const text = () => {
    let out = '';
    while (out.length < chars) out += `${WORDS[Math.floor(rand() * WORDS.length)]} `;
    out = out.slice(0, chars);
    return rand() < 0.05 ? `${out.slice(0, -1)}é` : out;
  };
  return Array.from({ length: traces }, (_, t) => ({
    traceId: `trace-${seed}-${t}`,
    traceName: 'bench',
    customer: { id: `cust-${Math.floor(rand() * 50)}` },
    spans: Array.from({ length: spans }, (_, i): Span => {
      const [provider, modelId] = BENCH_MODELS[Math.floor(rand() * BENCH_MODELS.length)] as (typeof BENCH_MODELS)[number];
      const start = DAY + Math.floor(rand() * 86_400_000);
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
        input: text(),
        output: text(),
        metadata: { env: 'bench', region: 'eu' },
      };
    }),
  }));
}

// Models, tiers and regions that reach every pricing rule: variants, fallbacks, long-context tiers, audio, Bedrock ids, unknown models, overrides.
const MODELS: readonly [string | undefined, string | undefined][] = [
  ['openai', 'gpt-4o'],
  ['openai', 'gpt-5'],
  ['openai', 'gpt-5.4'],
  ['openai', 'gpt-realtime'],
  ['openai', 'gpt-4o-audio-preview'],
  ['anthropic', 'claude-sonnet-4-5'],
  ['anthropic', 'claude-opus-4-6'],
  ['google', 'gemini-2.5-pro'],
  ['google', 'gemini-2.5-flash'],
  ['gcp.gemini', 'gemini-3.6-flash'],
  ['gcp.vertex_ai', 'claude-sonnet-4-5'],
  ['gcp.vertex_ai', 'gemini-2.5-flash'],
  ['aws.bedrock', 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'],
  [undefined, 'global.anthropic.claude-sonnet-4-5-20250929-v1:0'],
  [undefined, 'anthropic.claude-sonnet-4-5-20250929-v1:0'],
  ['OpenAI ', 'openai/gpt-4o-mini'],
  [undefined, 'gpt-4o'],
  ['vllm', 'my-llama'],
  ['openai', 'org-only'],
  ['mistral', 'no-such-model'],
  ['openai', undefined],
  ['openai', ''],
];
const TIERS = [undefined, undefined, undefined, 'flex', 'priority', 'default', 'scale', 'batch', 'ON_DEMAND'];
const REGIONS = [undefined, undefined, undefined, 'us', 'eu', 'global', 'us-east5', 'us-central1', ' EU '];
const COUNTS = [undefined, 0, 0, 1, 7, 999, 12_345, 250_000, 1_000_000, 2 ** 31, Number.MAX_SAFE_INTEGER];
const USAGE_FIELDS: readonly (keyof Usage)[] = [
  'inputTokens',
  'outputTokens',
  'totalTokens',
  'reasoningTokens',
  'cachedInputTokens',
  'cacheWriteInputTokens',
  'cacheWrite1hInputTokens',
  'audioInputTokens',
  'cachedAudioInputTokens',
  'audioOutputTokens',
  'imageCount',
  'webSearchCount',
  'requestCount',
];
// Pieces of text that exercise escaping: quotes, backslashes, control characters, U+2028, astral code points, lone surrogates.
const PIECES = ['a', 'b c', 'é', '"', '\\', '\n', '\t', '\u0000', '\u001f', '\u007f', '\u2028', '😀', '\ud800', '\udc00', '\\ud800', '\\\ud800', '{"k":1}'];

/** Spans drawn from every rule above; texts from 0 to 3,000 characters, some with one escape only at the end. */
function edgeTraces(seed: number, traces: number): Trace[] {
  const rand = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const text = (): string | undefined => {
    const kind = rand();
    if (kind < 0.1) return undefined;
    if (kind < 0.2) return '';
    if (kind < 0.4) return 'plain words '.repeat(1 + Math.floor(rand() * 250));
    if (kind < 0.5) return `${'plain words '.repeat(1 + Math.floor(rand() * 250))}${pick(PIECES)}`;
    let out = '';
    const n = Math.floor(rand() * 40);
    for (let i = 0; i < n; i++) out += pick(PIECES);
    return out;
  };
  const usage = (): Usage | undefined => {
    if (rand() < 0.1) return undefined;
    // Mostly the buckets every model prices; else any bucket, which leaves most models unpriced.
    const fields = rand() < 0.7 ? USAGE_FIELDS.slice(0, 6) : USAGE_FIELDS;
    const u: Usage = {};
    for (const f of fields) {
      const c = rand() < 0.4 ? undefined : pick(COUNTS);
      if (c !== undefined) u[f] = c;
    }
    return u;
  };
  const optional = <T>(v: T | undefined): T | undefined => (rand() < 0.5 ? v : undefined);
  return Array.from({ length: traces }, (_, t) => ({
    traceId: `edge-${t}${pick(PIECES)}`,
    traceName: optional(text()),
    agentName: optional(text()),
    sessionId: optional(text()),
    customer: rand() < 0.5 ? { id: `c${pick(PIECES)}`, name: text() } : undefined,
    metadata: rand() < 0.5 ? { [`k${pick(PIECES)}`]: pick(PIECES), __proto__x: 'v' } : undefined,
    spans: Array.from({ length: 1 + Math.floor(rand() * 8) }, (_, i): Span => {
      const [provider, modelId] = pick(MODELS);
      const start = DAY + Math.floor(rand() * 3 * 86_400_000);
      const batch = rand() < 0.1 ? true : undefined;
      return {
        spanId: `s${i}${pick(PIECES)}`,
        spanType: pick(['agent', 'llm', 'tool', 'embedding']),
        name: pick(PIECES),
        startTime: start,
        endTime: start + Math.floor(rand() * 5000),
        ...(provider === undefined ? {} : { provider }),
        ...(modelId === undefined ? {} : { modelId }),
        ...(batch === undefined ? {} : { batch }),
        serviceTier: rand() < 0.5 ? undefined : pick(TIERS),
        region: rand() < 0.5 ? undefined : pick(REGIONS),
        status: pick(['ok', 'error', undefined]),
        errorMessage: optional(text()),
        usage: usage(),
        input: text(),
        output: text(),
        toolCatalog: optional(text()),
        systemFingerprint: optional(text()),
        ttftMs: optional(rand() * 1000),
        chunkOffsets: optional([1, 2, 3]),
        metadata: rand() < 0.3 ? { [pick(PIECES)]: pick(PIECES) } : undefined,
      } as Span;
    }),
  }));
}

const OVERRIDE: Omit<PriceOverride, 'id' | 'orgId' | 'provider' | 'model'> = {
  validFrom: 0,
  inputPerMtok: '1.23',
  outputPerMtok: '4.56',
  cachedInputPerMtok: null,
  cacheWriteInputPerMtok: '0.000000000000000007',
  reasoningPerMtok: null,
  imageEach: '0.04',
  webSearchEach: null,
  requestEach: '0.001',
};

const ctx = { orgId: 'org_"digest\\', keyPrefix: 'ti_digest', receivedAt: DAY + 123 };
const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex').slice(0, 32);

/** The lines and the costs of a batch, as the request path makes them, each hashed. */
function digests(engine: PriceEngine, traces: readonly Trace[]): { lines: string; costs: string } {
  const lines: string[] = [];
  const costs: SpanCosts[] = [];
  for (const trace of traces) {
    const head = encodeTraceHead(trace, ctx);
    for (const span of trace.spans) {
      const c = engine.price(span, ctx.orgId);
      costs.push(c);
      const line = encodeSpanLine(head, span, c);
      // The plain form (JSON.stringify of the row object) is the reference each line is held to first.
      const row = spanToRow(trace, span, ctx, c);
      expect(line).toBe(encodeLine(row));
      expect(completeRow(JSON.parse(line) as Record<string, unknown>)).toEqual(JSON.parse(encodeRow(row)));
      lines.push(line);
    }
  }
  return { lines: sha(lines.join('\n')), costs: sha(JSON.stringify(costs)) };
}

describe('the lines and costs of the request path', () => {
  let engine: PriceEngine;
  beforeAll(async () => {
    const { adoptions } = JSON.parse(fs.readFileSync(path.join(CATALOG_DIR, 'adoptions.json'), 'utf8')) as { adoptions: Adoption[] };
    engine = await PriceEngine.create({
      adoptions,
      overrides: [
        { ...OVERRIDE, id: 'org-only', orgId: ctx.orgId, provider: 'openai', model: 'org-only' },
        { ...OVERRIDE, id: 'llama', orgId: '', provider: 'vllm', model: 'my-llama', validFrom: DAY + 86_400_000 },
      ],
    });
  });

  it.each([
    ['small', benchTraces(1, 10, 10, 340), { lines: '389fa6c5cdbca06a5d9b2cc4fc532812', costs: '814255e1684c3d9051eb94e7c46d88c8' }],
    ['large', benchTraces(2, 4, 50, 2000), { lines: '1db899b5c961a5e52529fea09a967a5e', costs: 'c3fa58460195c3eb37b94e2202a9bbe5' }],
    ['edge', edgeTraces(3, 120), { lines: '0c2bec7e91d534b4ae7216dcddff99ff', costs: 'cab2493dc549f96cb9fd1538bab011aa' }],
  ])('are byte for byte the pinned ones on %s batches', (_name, traces, expected) => {
    expect(digests(engine, traces)).toEqual(expected);
  });
});
