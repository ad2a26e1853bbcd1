import type { IngestPayload, Span, Trace } from '@trace-ingest/shared/schema';
import { makeSpan, makeTrace } from './factories.js';

/**
 * Every rule of ingest-api-v1.md section 2 as a table: the valid edge (at
 * the limit) and the invalid one (one over), field by field. Shared by the
 * HTTP conformance suite and the OpenAPI agreement test.
 */

export type Mutation = (p: IngestPayload) => void;
const trace0 = (p: IngestPayload): Trace => p.traces[0] as Trace;
const span0 = (p: IngestPayload): Span => trace0(p).spans[0] as Span;
const onTrace =
  (f: (t: Record<string, unknown>) => void): Mutation =>
  (p) =>
    f(trace0(p) as unknown as Record<string, unknown>);
const onSpan =
  (f: (s: Record<string, unknown>) => void): Mutation =>
  (p) =>
    f(span0(p) as unknown as Record<string, unknown>);
const s = (n: number, ch = 'a'): string => ch.repeat(n);
const emoji = (n: number): string => '😀'.repeat(n);
const many = (n: number): Record<string, string> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
const ints = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

export interface Case {
  name: string;
  mutate: Mutation;
  /** Undefined: valid. Otherwise the path of the expected issue. */
  issue?: string;
}

const stringLimit = (where: 'trace' | 'span', field: string, max: number, min = 0): Case[] => {
  const on = where === 'trace' ? onTrace : onSpan;
  const at = where === 'trace' ? `traces[0].${field}` : `traces[0].spans[0].${field}`;
  const cases: Case[] = [
    { name: `${field} at ${max} chars`, mutate: on((o) => (o[field] = s(max))) },
    { name: `${field} at ${max + 1} chars`, mutate: on((o) => (o[field] = s(max + 1))), issue: at },
    { name: `${field} not a string`, mutate: on((o) => (o[field] = 5)), issue: at },
  ];
  if (min > 0) cases.push({ name: `${field} empty`, mutate: on((o) => (o[field] = '')), issue: at });
  return cases;
};

const countField = (obj: 'usage' | 'rateLimit', field: string): Case[] => {
  const at = `traces[0].spans[0].${obj}.${field}`;
  return [
    { name: `${obj}.${field} = 0`, mutate: onSpan((o) => (o[obj] = { [field]: 0 })) },
    { name: `${obj}.${field} large`, mutate: onSpan((o) => (o[obj] = { [field]: 9_007_199_254_740_991 })) },
    { name: `${obj}.${field} = -1`, mutate: onSpan((o) => (o[obj] = { [field]: -1 })), issue: at },
    { name: `${obj}.${field} = 1.5`, mutate: onSpan((o) => (o[obj] = { [field]: 1.5 })), issue: at },
    { name: `${obj}.${field} = "3"`, mutate: onSpan((o) => (o[obj] = { [field]: '3' })), issue: at },
  ];
};

const chunkArray = (field: string): Case[] => [
  { name: `${field} with 200 items`, mutate: onSpan((o) => (o[field] = ints(200))) },
  { name: `${field} with 201 items`, mutate: onSpan((o) => (o[field] = ints(201))), issue: `traces[0].spans[0].${field}` },
  { name: `${field} with a negative item`, mutate: onSpan((o) => (o[field] = [1, -1])), issue: `traces[0].spans[0].${field}[1]` },
  { name: `${field} with a fraction`, mutate: onSpan((o) => (o[field] = [0.5])), issue: `traces[0].spans[0].${field}[0]` },
];

const intField = (field: string): Case[] => [
  { name: `${field} = 0`, mutate: onSpan((o) => (o[field] = 0)) },
  { name: `${field} = -1`, mutate: onSpan((o) => (o[field] = -1)), issue: `traces[0].spans[0].${field}` },
  { name: `${field} = 2.5`, mutate: onSpan((o) => (o[field] = 2.5)), issue: `traces[0].spans[0].${field}` },
];

const metadataCases = (where: 'trace' | 'span'): Case[] => {
  const on = where === 'trace' ? onTrace : onSpan;
  const at = where === 'trace' ? 'traces[0].metadata' : 'traces[0].spans[0].metadata';
  return [
    { name: `${where} metadata with 64 entries`, mutate: on((o) => (o.metadata = many(64))) },
    { name: `${where} metadata with 65 entries`, mutate: on((o) => (o.metadata = many(65))), issue: at },
    { name: `${where} metadata key of 128 chars`, mutate: on((o) => (o.metadata = { [s(128)]: 'v' })) },
    { name: `${where} metadata key of 129 chars`, mutate: on((o) => (o.metadata = { [s(129)]: 'v' })), issue: `${at}.${s(129)}` },
    { name: `${where} metadata value of 1024 chars`, mutate: on((o) => (o.metadata = { k: s(1024) })) },
    { name: `${where} metadata value of 1025 chars`, mutate: on((o) => (o.metadata = { k: s(1025) })), issue: `${at}.k` },
    { name: `${where} metadata value not a string`, mutate: on((o) => (o.metadata = { k: 1 })), issue: `${at}.k` },
    { name: `${where} metadata not an object`, mutate: on((o) => (o.metadata = ['a'])), issue: at },
  ];
};

export const CASES: Case[] = [
  { name: 'the minimal payload', mutate: () => undefined },
  { name: 'version v2', mutate: (p) => ((p as { version: string }).version = 'v2'), issue: 'version' },
  { name: 'no version', mutate: (p) => delete (p as Partial<IngestPayload>).version, issue: 'version' },
  { name: 'unknown top-level field', mutate: (p) => ((p as unknown as Record<string, unknown>).extra = 1), issue: '(root)' },
  { name: 'no traces', mutate: (p) => (p.traces = []), issue: 'traces' },
  { name: '1000 traces', mutate: (p) => (p.traces = Array.from({ length: 1000 }, () => makeTrace())) },
  { name: '1001 traces', mutate: (p) => (p.traces = Array.from({ length: 1001 }, () => makeTrace())), issue: 'traces' },
  { name: 'no spans', mutate: onTrace((t) => (t.spans = [])), issue: 'traces[0].spans' },
  { name: '2000 spans', mutate: onTrace((t) => (t.spans = Array.from({ length: 2000 }, () => makeSpan()))) },
  { name: '2001 spans', mutate: onTrace((t) => (t.spans = Array.from({ length: 2001 }, () => makeSpan()))), issue: 'traces[0].spans' },
  ...stringLimit('trace', 'traceId', 128, 1),
  ...stringLimit('trace', 'traceName', 256),
  ...stringLimit('trace', 'agentName', 256),
  ...stringLimit('trace', 'sessionId', 128),
  { name: 'traceName of 256 astral characters', mutate: onTrace((t) => (t.traceName = emoji(256))) },
  { name: 'traceName of 257 astral characters', mutate: onTrace((t) => (t.traceName = emoji(257))), issue: 'traces[0].traceName' },
  {
    name: 'agentName only',
    mutate: onTrace((t) => {
      delete t.traceName;
      t.agentName = 'a';
    }),
  },
  { name: 'neither traceName nor agentName', mutate: onTrace((t) => delete t.traceName), issue: 'traces[0].traceName' },
  {
    name: 'workflowName with workflowRunId',
    mutate: onTrace((t) => {
      t.workflowName = s(256);
      t.workflowRunId = s(128);
    }),
  },
  {
    name: 'workflowName of 257',
    mutate: onTrace((t) => {
      t.workflowName = s(257);
      t.workflowRunId = 'r';
    }),
    issue: 'traces[0].workflowName',
  },
  {
    name: 'workflowRunId of 129',
    mutate: onTrace((t) => {
      t.workflowName = 'w';
      t.workflowRunId = s(129);
    }),
    issue: 'traces[0].workflowRunId',
  },
  { name: 'workflowName alone', mutate: onTrace((t) => (t.workflowName = 'w')), issue: 'traces[0].workflowRunId' },
  { name: 'workflowRunId alone', mutate: onTrace((t) => (t.workflowRunId = 'r')), issue: 'traces[0].workflowName' },
  { name: 'unknown trace field', mutate: onTrace((t) => (t.userId = 'u')), issue: 'traces[0]' },
  { name: 'customer with every field', mutate: onTrace((t) => (t.customer = { id: s(128), name: s(256), imageUrl: 'https://example.com/' + s(2028) })) },
  { name: 'customer without id', mutate: onTrace((t) => (t.customer = { name: 'n' })), issue: 'traces[0].customer.id' },
  { name: 'customer id of 129', mutate: onTrace((t) => (t.customer = { id: s(129) })), issue: 'traces[0].customer.id' },
  { name: 'customer id empty', mutate: onTrace((t) => (t.customer = { id: '' })), issue: 'traces[0].customer.id' },
  { name: 'customer name of 257', mutate: onTrace((t) => (t.customer = { id: 'c', name: s(257) })), issue: 'traces[0].customer.name' },
  { name: 'customer imageUrl not a URI', mutate: onTrace((t) => (t.customer = { id: 'c', imageUrl: 'not a uri' })), issue: 'traces[0].customer.imageUrl' },
  {
    name: 'customer imageUrl of 2049',
    mutate: onTrace((t) => (t.customer = { id: 'c', imageUrl: 'https://example.com/' + s(2029) })),
    issue: 'traces[0].customer.imageUrl',
  },
  { name: 'unknown customer field', mutate: onTrace((t) => (t.customer = { id: 'c', email: 'e' })), issue: 'traces[0].customer' },
  ...metadataCases('trace'),
  ...metadataCases('span'),
  ...stringLimit('span', 'spanId', 128, 1),
  ...stringLimit('span', 'parentSpanId', 128, 1),
  ...stringLimit('span', 'name', 512),
  ...stringLimit('span', 'errorMessage', 8192),
  ...stringLimit('span', 'provider', 128),
  ...stringLimit('span', 'modelId', 256),
  ...stringLimit('span', 'systemFingerprint', 256),
  ...stringLimit('span', 'safetyMetadata', 16384),
  ...stringLimit('span', 'input', 1_000_000),
  ...stringLimit('span', 'output', 1_000_000),
  ...stringLimit('span', 'toolCatalog', 1_000_000),
  ...stringLimit('span', 'sources', 1_000_000),
  { name: 'no spanId', mutate: onSpan((o) => delete o.spanId), issue: 'traces[0].spans[0].spanId' },
  { name: 'no name', mutate: onSpan((o) => delete o.name), issue: 'traces[0].spans[0].name' },
  ...['agent', 'llm', 'tool', 'embedding', 'other'].map((v): Case => ({ name: `spanType ${v}`, mutate: onSpan((o) => (o.spanType = v)) })),
  { name: 'spanType chain', mutate: onSpan((o) => (o.spanType = 'chain')), issue: 'traces[0].spans[0].spanType' },
  { name: 'no spanType', mutate: onSpan((o) => delete o.spanType), issue: 'traces[0].spans[0].spanType' },
  { name: 'status ok', mutate: onSpan((o) => (o.status = 'ok')) },
  { name: 'status error', mutate: onSpan((o) => (o.status = 'error')) },
  { name: 'status failed', mutate: onSpan((o) => (o.status = 'failed')), issue: 'traces[0].spans[0].status' },
  {
    name: 'startTime 0 and endTime 0',
    mutate: onSpan((o) => {
      o.startTime = 0;
      o.endTime = 0;
    }),
  },
  { name: 'startTime -1', mutate: onSpan((o) => (o.startTime = -1)), issue: 'traces[0].spans[0].startTime' },
  { name: 'startTime 1.5', mutate: onSpan((o) => (o.startTime = 1.5)), issue: 'traces[0].spans[0].startTime' },
  {
    name: 'startTime at the end of year 9999',
    mutate: onSpan((o) => {
      o.startTime = 253_402_300_799_999;
      o.endTime = 253_402_300_799_999;
    }),
  },
  {
    name: 'startTime after year 9999',
    mutate: onSpan((o) => {
      o.startTime = 253_402_300_800_000;
      o.endTime = 253_402_300_800_000;
    }),
    issue: 'traces[0].spans[0].startTime',
  },
  { name: 'startTime as a string', mutate: onSpan((o) => (o.startTime = '1')), issue: 'traces[0].spans[0].startTime' },
  { name: 'no endTime', mutate: onSpan((o) => delete o.endTime), issue: 'traces[0].spans[0].endTime' },
  { name: 'endTime equal to startTime', mutate: onSpan((o) => (o.endTime = o.startTime)) },
  { name: 'endTime before startTime', mutate: onSpan((o) => (o.endTime = (o.startTime as number) - 1)), issue: 'traces[0].spans[0].endTime' },
  {
    name: 'usage with every field',
    mutate: onSpan(
      (o) =>
        (o.usage = {
          inputTokens: 1,
          outputTokens: 1,
          totalTokens: 1,
          reasoningTokens: 1,
          cachedInputTokens: 1,
          cacheWriteInputTokens: 1,
          imageCount: 1,
          webSearchCount: 1,
          requestCount: 1,
        }),
    ),
  },
  ...[
    'inputTokens',
    'outputTokens',
    'totalTokens',
    'reasoningTokens',
    'cachedInputTokens',
    'cacheWriteInputTokens',
    'imageCount',
    'webSearchCount',
    'requestCount',
  ].flatMap((f) => countField('usage', f)),
  { name: 'unknown usage field', mutate: onSpan((o) => (o.usage = { promptTokens: 1 })), issue: 'traces[0].spans[0].usage' },
  ...['requestsLimit', 'requestsRemaining', 'requestsResetMs', 'tokensLimit', 'tokensRemaining', 'tokensResetMs'].flatMap((f) => countField('rateLimit', f)),
  { name: 'unknown rateLimit field', mutate: onSpan((o) => (o.rateLimit = { retryAfter: 1 })), issue: 'traces[0].spans[0].rateLimit' },
  { name: 'ttftMs fractional', mutate: onSpan((o) => (o.ttftMs = 12.75)) },
  { name: 'ttftMs -0.5', mutate: onSpan((o) => (o.ttftMs = -0.5)), issue: 'traces[0].spans[0].ttftMs' },
  ...chunkArray('chunkOffsets'),
  ...chunkArray('chunkTokens'),
  ...chunkArray('reasoningOffsets'),
  ...chunkArray('reasoningChunkTokens'),
  ...intField('reasoningDurationMs'),
  ...intField('modelCallMs'),
  { name: 'unknown span field', mutate: onSpan((o) => (o.tokens = 1)), issue: 'traces[0].spans[0]' },
  {
    name: 'an issue deep in the batch',
    mutate: (p) => {
      p.traces = [makeTrace(), makeTrace({ spans: [makeSpan(), makeSpan(), makeSpan(), makeSpan({ endTime: 0, startTime: 5 })] })];
    },
    issue: 'traces[1].spans[3].endTime',
  },
];
