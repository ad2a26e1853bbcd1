import fs from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePayload, makeSpan, makeTrace } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * Property-based verdicts of POST /ingest (ingest-api-v1.md section 2),
 * through the real HTTP server over real SQLite and DuckDB: every payload
 * generated from the schema's rules is answered 202 with the count of its
 * spans, and every payload with exactly one rule broken is answered 400 with
 * an issue at the broken field's path. The hand-written edge table lives in
 * ingest-conformance.test.ts; this file generates instead.
 */

type Obj = Record<string, unknown>;

// ---------------------------------------------------------------------------
// Text: each unit is exactly one code point, so fast-check's lengths are the
// schema's lengths (limits count code points). Lone surrogates are left out
// here: they are the subject of a named test at the end of this file.
// ---------------------------------------------------------------------------

const isWellFormed = (c: string): boolean => !/[\ud800-\udfff]/.test(c) || /^[\ud800-\udbff][\udc00-\udfff]$/.test(c);
const unit: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('a', 'b', 'Z', '0', '-', '_', ' ', '.') },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }).filter(isWellFormed) },
  { weight: 2, arbitrary: fc.constantFrom('😀', '\u{10FFFF}', 'é', '\u0000', '"', '\\', '\n', '\u2028', '\uFEFF', '\u{1F468}') },
);

const BIG = 16_384;

/** A string of `min`..`max` code points; sometimes exactly `max` (the valid edge). */
function text(max: number, min = 0): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: max >= BIG ? 60 : 8, arbitrary: fc.string({ unit, minLength: min, maxLength: Math.min(max, 12) }) },
    { weight: 1, arbitrary: unit.map((c) => c.repeat(max)) },
  );
}

/** A string one or a few code points over `max`. */
function tooLong(max: number): fc.Arbitrary<string> {
  return fc.tuple(unit, fc.integer({ min: 1, max: 3 })).map(([c, k]) => c.repeat(max + k));
}

const MAX_INT = Number.MAX_SAFE_INTEGER;
const count = fc.oneof({ weight: 6, arbitrary: fc.nat({ max: 1_000_000 }) }, { weight: 1, arbitrary: fc.constantFrom(0, MAX_INT) });

/**
 * Epoch ms up to the end of year 9999. Later instants (still integers >= 0,
 * so valid by the spec) are the subject of the named tests at the end of this
 * file: the server cannot store them.
 */
const LAST_STORABLE_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const epochMs = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: LAST_STORABLE_MS }) },
);

const metadataKey = fc.oneof(
  { weight: 6, arbitrary: text(128) },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'prototype') },
);

/** Built from entries so `__proto__` becomes an own key, as JSON.parse makes it on the server. */
const metadata: fc.Arbitrary<Obj> = fc
  .oneof(
    { weight: 8, arbitrary: fc.uniqueArray(fc.tuple(metadataKey, text(1024)), { selector: (e) => e[0], maxLength: 5 }) },
    { weight: 1, arbitrary: fc.uniqueArray(fc.tuple(text(128), text(1024)), { selector: (e) => e[0], minLength: 64, maxLength: 64 }) },
  )
  .map((entries) => Object.fromEntries(entries));

const countArray = fc.oneof(
  { weight: 8, arbitrary: fc.array(count, { maxLength: 5 }) },
  { weight: 1, arbitrary: fc.array(fc.nat(), { minLength: 200, maxLength: 200 }) },
);

const usage = fc.record(
  Object.fromEntries(
    [
      'inputTokens',
      'outputTokens',
      'totalTokens',
      'reasoningTokens',
      'cachedInputTokens',
      'cacheWriteInputTokens',
      'imageCount',
      'webSearchCount',
      'requestCount',
    ].map((k) => [k, count]),
  ),
  { requiredKeys: [] },
);
const rateLimit = fc.record(
  Object.fromEntries(['requestsLimit', 'requestsRemaining', 'requestsResetMs', 'tokensLimit', 'tokensRemaining', 'tokensResetMs'].map((k) => [k, count])),
  { requiredKeys: [] },
);

const imageUrl = fc.oneof(
  { weight: 6, arbitrary: fc.webUrl({ withQueryParameters: true, withFragments: true }).filter((u) => u.length <= 2048) },
  { weight: 1, arbitrary: fc.constant('https://example.com/' + 'a'.repeat(2048 - 20)) },
);
const customer = fc.record({ id: text(128, 1), name: text(256), imageUrl }, { requiredKeys: ['id'] });

const span: fc.Arbitrary<Obj> = fc
  .record(
    {
      spanId: text(128, 1),
      parentSpanId: text(128, 1),
      spanType: fc.constantFrom('agent', 'llm', 'tool', 'embedding', 'other'),
      name: text(512),
      startTime: epochMs,
      duration: fc.oneof(fc.constant(0), fc.nat({ max: 3_600_000 })),
      status: fc.constantFrom('ok', 'error'),
      errorMessage: text(8192),
      provider: text(128),
      modelId: text(256),
      usage,
      ttftMs: fc.oneof(fc.double({ min: 0, max: 1e9, noNaN: true, noDefaultInfinity: true }), fc.constantFrom(0, 1e308, 5e-324)),
      chunkOffsets: countArray,
      chunkTokens: countArray,
      reasoningOffsets: countArray,
      reasoningChunkTokens: countArray,
      reasoningDurationMs: count,
      input: text(1_000_000),
      output: text(1_000_000),
      toolCatalog: text(1_000_000),
      modelCallMs: count,
      systemFingerprint: text(256),
      safetyMetadata: text(16_384),
      sources: text(1_000_000),
      rateLimit,
      metadata,
    },
    { requiredKeys: ['spanId', 'spanType', 'name', 'startTime', 'duration'] },
  )
  .map(({ duration, ...s }) => ({ ...s, endTime: Math.min(s.startTime + duration, LAST_STORABLE_MS) }));

const trace: fc.Arbitrary<Obj> = fc
  .record(
    {
      traceId: text(128, 1),
      names: fc.oneof(fc.record({ traceName: text(256) }), fc.record({ agentName: text(256) }), fc.record({ traceName: text(256), agentName: text(256) })),
      workflow: fc.option(fc.record({ workflowName: text(256), workflowRunId: text(128) }), { nil: undefined }),
      sessionId: fc.option(text(128), { nil: undefined }),
      customer: fc.option(customer, { nil: undefined }),
      metadata: fc.option(metadata, { nil: undefined }),
      spans: fc.array(span, { minLength: 1, maxLength: 3 }),
    },
    { requiredKeys: ['traceId', 'names', 'spans'] },
  )
  .map(({ names, workflow, sessionId, customer: c, metadata: m, ...t }) => ({
    ...t,
    ...names,
    ...workflow,
    ...(sessionId === undefined ? {} : { sessionId }),
    ...(c === undefined ? {} : { customer: c }),
    ...(m === undefined ? {} : { metadata: m }),
  }));

const payload: fc.Arbitrary<Obj> = fc.array(trace, { minLength: 1, maxLength: 3 }).map((traces) => ({ version: 'v1', traces }));

const spanCount = (p: Obj): number => (p.traces as Obj[]).reduce((n, t) => n + (t.spans as unknown[]).length, 0);

/**
 * The identities of a payload's spans. A span is identified by (org, traceId,
 * spanId): the span store keeps the first row of an identity (a replayed batch
 * never shows a span twice), so a repeated identity is stored once.
 */
const spanIds = (p: Obj): string[] => (p.traces as Obj[]).flatMap((t) => (t.spans as Obj[]).map((s) => JSON.stringify([t.traceId, s.spanId])));

// ---------------------------------------------------------------------------
// Rule breakers: each draws a wrong value and applies it to one place of a
// valid payload, returning the path the answer must name.
// ---------------------------------------------------------------------------

type Breaker = (p: Obj) => string;
interface Rule {
  rule: string;
  breaker: fc.Arbitrary<Breaker>;
}

const notString = fc.constantFrom<unknown>(5, 0, null, true, false, [], ['a'], {}, { a: 'b' });
const notInteger = fc.constantFrom<unknown>(-1, -1e-9, 0.5, 1.5, 2 ** 53, 1e300, '3', '0', null, true, [], {}, [1]);
const notObject = fc.constantFrom<unknown>(5, 'x', null, true, [], [{}]);
const notArray = fc.constantFrom<unknown>(5, 'x', null, true, {}, { 0: 1 });

const KNOWN = new Set([
  'version',
  'traces',
  'traceId',
  'traceName',
  'agentName',
  'workflowName',
  'workflowRunId',
  'sessionId',
  'customer',
  'metadata',
  'spans',
  'id',
  'name',
  'imageUrl',
  'spanId',
  'parentSpanId',
  'spanType',
  'startTime',
  'endTime',
  'status',
  'errorMessage',
  'provider',
  'modelId',
  'usage',
  'ttftMs',
  'chunkOffsets',
  'chunkTokens',
  'reasoningOffsets',
  'reasoningChunkTokens',
  'reasoningDurationMs',
  'input',
  'output',
  'toolCatalog',
  'modelCallMs',
  'systemFingerprint',
  'safetyMetadata',
  'sources',
  'rateLimit',
  'inputTokens',
  'outputTokens',
  'totalTokens',
  'reasoningTokens',
  'cachedInputTokens',
  'cacheWriteInputTokens',
  'imageCount',
  'webSearchCount',
  'requestCount',
  'requestsLimit',
  'requestsRemaining',
  'requestsResetMs',
  'tokensLimit',
  'tokensRemaining',
  'tokensResetMs',
]);
const unknownKey = fc
  .oneof(
    fc.constantFrom('__proto__', 'constructor', 'prototype', 'orgId', 'org_id', 'toString', 'Version', 'traceid', ' traceId'),
    fc.string({ minLength: 1, maxLength: 20 }),
  )
  .filter((k) => !KNOWN.has(k));
const anyJson = fc.oneof(fc.constant(null), fc.boolean(), fc.integer(), fc.string({ maxLength: 5 }), fc.constant({}), fc.constant([]));

/** Sets `key` as an own property (also `__proto__`), as JSON.parse would. */
function defineOwn(o: Obj, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

const pick = <T>(xs: T[], n: number): [T, number] => {
  const i = n % xs.length;
  return [xs[i] as T, i];
};

/** Applies `f` to a trace chosen by `n`; `f` returns the path below it ('' for the trace). */
function atTrace(f: fc.Arbitrary<(t: Obj) => string>): fc.Arbitrary<Breaker> {
  return fc.tuple(fc.nat(), f).map(([n, g]) => (p: Obj) => {
    const [t, i] = pick(p.traces as Obj[], n);
    return `traces[${i}]${g(t)}`;
  });
}
function atSpan(f: fc.Arbitrary<(s: Obj) => string>): fc.Arbitrary<Breaker> {
  return fc.tuple(fc.nat(), fc.nat(), f).map(([n, m, g]) => (p: Obj) => {
    const [t, i] = pick(p.traces as Obj[], n);
    const [s, j] = pick(t.spans as Obj[], m);
    return `traces[${i}].spans[${j}]${g(s)}`;
  });
}
/** Applies `f` to the object at `field` of `o`, creating it from `init` when absent. */
const within =
  (field: string, init: () => Obj, g: (o: Obj) => string) =>
  (o: Obj): string => {
    if (typeof o[field] !== 'object' || o[field] === null) o[field] = init();
    return `.${field}${g(o[field] as Obj)}`;
  };

const setField = (field: string, value: fc.Arbitrary<unknown>) => value.map((v) => (o: Obj) => ((o[field] = v), `.${field}`));
const deleteField = (field: string) => fc.constant((o: Obj) => (delete o[field], `.${field}`));
const addUnknown = fc.tuple(unknownKey, anyJson).map(
  ([k, v]) =>
    (o: Obj) => (defineOwn(o, k, v), ''),
);

function stringRules(where: 'trace' | 'span' | 'customer', field: string, max: number, min = 0, required = false): Rule[] {
  const at = (g: fc.Arbitrary<(o: Obj) => string>): fc.Arbitrary<Breaker> =>
    where === 'trace' ? atTrace(g) : where === 'span' ? atSpan(g) : atTrace(g.map((h) => within('customer', () => ({ id: 'c' }), h)));
  const rules: Rule[] = [
    { rule: `${where}.${field} over ${max} code points`, breaker: at(setField(field, tooLong(max))) },
    { rule: `${where}.${field} not a string`, breaker: at(setField(field, notString)) },
  ];
  if (min > 0) rules.push({ rule: `${where}.${field} empty`, breaker: at(setField(field, fc.constant(''))) });
  if (required) rules.push({ rule: `${where}.${field} missing`, breaker: at(deleteField(field)) });
  return rules;
}

function intRules(field: string, required = false): Rule[] {
  const rules: Rule[] = [{ rule: `span.${field} not an integer >= 0`, breaker: atSpan(setField(field, notInteger)) }];
  if (required) rules.push({ rule: `span.${field} missing`, breaker: atSpan(deleteField(field)) });
  return rules;
}

function countObjectRules(obj: 'usage' | 'rateLimit', fields: string[]): Rule[] {
  return [
    ...fields.map((f) => ({ rule: `${obj}.${f} not an integer >= 0`, breaker: atSpan(setField(f, notInteger).map((g) => within(obj, () => ({}), g))) })),
    { rule: `${obj} not an object`, breaker: atSpan(setField(obj, notObject)) },
    { rule: `${obj} with an unknown field`, breaker: atSpan(addUnknown.map((g) => within(obj, () => ({}), g))) },
  ];
}

function metadataRules(where: 'trace' | 'span'): Rule[] {
  const at = where === 'trace' ? atTrace : atSpan;
  const on = (g: fc.Arbitrary<(m: Obj) => string>) => at(g.map((h) => within('metadata', () => ({}), h)));
  return [
    { rule: `${where}.metadata not an object`, breaker: at(setField('metadata', fc.constantFrom<unknown>(5, 'x', true, ['a'], [['k', 'v']]))) },
    {
      rule: `${where}.metadata over 64 entries`,
      breaker: on(
        fc.integer({ min: 65, max: 70 }).map((n) => (m: Obj) => {
          // A `__proto__` entry is not counted: see the named test of that defect below.
          for (let i = 0; Object.keys(m).filter((k) => k !== '__proto__').length < n; i++) m[`extra-${i}`] = 'v';
          return '';
        }),
      ),
    },
    { rule: `${where}.metadata key over 128 code points`, breaker: on(tooLong(128).map((k) => (m: Obj) => ((m[k] = 'v'), `.${k}`))) },
    {
      rule: `${where}.metadata value over 1024 code points`,
      breaker: on(
        fc.tuple(text(128), tooLong(1024)).map(
          ([k, v]) =>
            (m: Obj) => (defineOwn(m, k, v), `.${k}`),
        ),
      ),
    },
    {
      rule: `${where}.metadata value not a string`,
      breaker: on(
        fc.tuple(text(128), notString).map(
          ([k, v]) =>
            (m: Obj) => (defineOwn(m, k, v), `.${k}`),
        ),
      ),
    },
  ];
}

function chunkRules(field: string): Rule[] {
  return [
    {
      rule: `span.${field} over 200 items`,
      breaker: atSpan(fc.integer({ min: 201, max: 210 }).map((n) => (s: Obj) => ((s[field] = Array.from({ length: n }, (_, i) => i)), `.${field}`))),
    },
    {
      rule: `span.${field} with an item that is not an integer >= 0`,
      breaker: atSpan(
        fc.tuple(fc.array(fc.nat(), { maxLength: 5 }), notInteger, fc.nat()).map(([xs, bad, at]) => (s: Obj) => {
          const i = at % (xs.length + 1);
          const arr: unknown[] = [...xs];
          arr.splice(i, 0, bad);
          s[field] = arr;
          return `.${field}[${i}]`;
        }),
      ),
    },
    { rule: `span.${field} not an array`, breaker: atSpan(setField(field, notArray)) },
  ];
}

const enumBreak = (allowed: string[]) =>
  fc
    .oneof(fc.string({ maxLength: 10 }), fc.constantFrom(...allowed.map((a) => a.toUpperCase()), ...allowed.map((a) => `${a} `)), notString)
    .filter((v) => !allowed.includes(v as string));

const RULES: Rule[] = [
  // IngestPayload
  {
    rule: 'version not v1',
    breaker: fc
      .oneof(fc.string({ maxLength: 4 }), fc.constantFrom('V1', 'v1 ', 'v2', ' v1', 'v1\u0000'), notString)
      .filter((v) => v !== 'v1')
      .map((v) => (p: Obj) => ((p.version = v), 'version')),
  },
  { rule: 'version missing', breaker: fc.constant((p: Obj) => (delete p.version, 'version')) },
  { rule: 'traces missing', breaker: fc.constant((p: Obj) => (delete p.traces, 'traces')) },
  { rule: 'traces not an array', breaker: notArray.map((v) => (p: Obj) => ((p.traces = v), 'traces')) },
  { rule: 'traces empty', breaker: fc.constant((p: Obj) => ((p.traces = []), 'traces')) },
  { rule: 'traces over 1000', breaker: fc.constant((p: Obj) => ((p.traces = Array.from({ length: 1001 }, () => makeTrace())), 'traces')) },
  { rule: 'payload with an unknown field', breaker: addUnknown.map((g) => (p: Obj) => (g(p), '(root)')) },
  // Trace
  ...stringRules('trace', 'traceId', 128, 1, true),
  ...stringRules('trace', 'traceName', 256),
  ...stringRules('trace', 'agentName', 256),
  ...stringRules('trace', 'sessionId', 128),
  {
    rule: 'trace with neither traceName nor agentName',
    breaker: atTrace(fc.constant((t: Obj) => (delete t.traceName, delete t.agentName, '.traceName'))),
  },
  {
    rule: 'trace.workflowName over 256 code points',
    breaker: atTrace(tooLong(256).map((v) => (t: Obj) => ((t.workflowName = v), (t.workflowRunId ??= 'run'), '.workflowName'))),
  },
  {
    rule: 'trace.workflowRunId over 128 code points',
    breaker: atTrace(tooLong(128).map((v) => (t: Obj) => ((t.workflowRunId = v), (t.workflowName ??= 'wf'), '.workflowRunId'))),
  },
  {
    rule: 'trace.workflowName not a string',
    breaker: atTrace(notString.map((v) => (t: Obj) => ((t.workflowName = v), (t.workflowRunId ??= 'run'), '.workflowName'))),
  },
  {
    rule: 'trace with workflowName but no workflowRunId',
    breaker: atTrace(text(256).map((v) => (t: Obj) => ((t.workflowName = v), delete t.workflowRunId, '.workflowRunId'))),
  },
  {
    rule: 'trace with workflowRunId but no workflowName',
    breaker: atTrace(text(128).map((v) => (t: Obj) => ((t.workflowRunId = v), delete t.workflowName, '.workflowName'))),
  },
  { rule: 'trace.spans missing', breaker: atTrace(deleteField('spans')) },
  { rule: 'trace.spans not an array', breaker: atTrace(setField('spans', notArray)) },
  { rule: 'trace.spans empty', breaker: atTrace(setField('spans', fc.constant([]))) },
  { rule: 'trace.spans over 2000', breaker: atTrace(fc.constant((t: Obj) => ((t.spans = Array.from({ length: 2001 }, () => makeSpan())), '.spans'))) },
  {
    rule: 'trace not an object',
    breaker: fc.tuple(fc.nat(), notObject).map(([n, v]) => (p: Obj) => {
      const ts = p.traces as unknown[];
      const i = n % ts.length;
      ts[i] = v;
      return `traces[${i}]`;
    }),
  },
  { rule: 'trace with an unknown field', breaker: atTrace(addUnknown) },
  // Customer
  { rule: 'customer not an object', breaker: atTrace(setField('customer', notObject)) },
  {
    rule: 'customer.id missing',
    breaker: atTrace(
      fc.constant(
        within(
          'customer',
          () => ({ id: 'c' }),
          (c) => (delete c.id, '.id'),
        ),
      ),
    ),
  },
  ...stringRules('customer', 'id', 128, 1),
  ...stringRules('customer', 'name', 256),
  {
    rule: 'customer.imageUrl not a URI',
    breaker: atTrace(
      fc
        .oneof(
          fc.string({ unit: fc.constantFrom('a', 'b', ' ', '/', '.', '1'), maxLength: 20 }),
          fc.constantFrom('', 'not a uri', '//no-scheme', 'example.com/x.png', 'http//x'),
        )
        .map((v) =>
          within(
            'customer',
            () => ({ id: 'c' }),
            (c) => ((c.imageUrl = v), '.imageUrl'),
          ),
        ),
    ),
  },
  {
    rule: 'customer.imageUrl over 2048 code points',
    breaker: atTrace(
      fc.integer({ min: 1, max: 3 }).map((k) =>
        within(
          'customer',
          () => ({ id: 'c' }),
          (c) => ((c.imageUrl = 'https://example.com/' + 'a'.repeat(2048 - 20 + k)), '.imageUrl'),
        ),
      ),
    ),
  },
  {
    rule: 'customer.imageUrl not a string',
    breaker: atTrace(
      notString.map((v) =>
        within(
          'customer',
          () => ({ id: 'c' }),
          (c) => ((c.imageUrl = v), '.imageUrl'),
        ),
      ),
    ),
  },
  { rule: 'customer with an unknown field', breaker: atTrace(addUnknown.map((g) => within('customer', () => ({ id: 'c' }), g))) },
  // Metadata
  ...metadataRules('trace'),
  ...metadataRules('span'),
  // Span
  ...stringRules('span', 'spanId', 128, 1, true),
  ...stringRules('span', 'parentSpanId', 128, 1),
  ...stringRules('span', 'name', 512, 0, true),
  ...stringRules('span', 'errorMessage', 8192),
  ...stringRules('span', 'provider', 128),
  ...stringRules('span', 'modelId', 256),
  ...stringRules('span', 'systemFingerprint', 256),
  ...stringRules('span', 'safetyMetadata', 16_384),
  ...stringRules('span', 'input', 1_000_000),
  ...stringRules('span', 'output', 1_000_000),
  ...stringRules('span', 'toolCatalog', 1_000_000),
  ...stringRules('span', 'sources', 1_000_000),
  { rule: 'span.spanType not in the enum', breaker: atSpan(setField('spanType', enumBreak(['agent', 'llm', 'tool', 'embedding', 'other']))) },
  { rule: 'span.spanType missing', breaker: atSpan(deleteField('spanType')) },
  { rule: 'span.status not in the enum', breaker: atSpan(setField('status', enumBreak(['ok', 'error']))) },
  // startTime: wrong values that keep endTime >= startTime where they are numbers.
  {
    rule: 'span.startTime not an integer >= 0',
    breaker: atSpan(
      fc.oneof(fc.constantFrom<unknown>(-1, '0', null, true, [], {}, -MAX_INT), fc.constant('fraction')).map((v) => (s: Obj) => {
        s.startTime = v === 'fraction' ? (s.endTime as number) - 0.5 : v;
        return '.startTime';
      }),
    ),
  },
  { rule: 'span.startTime missing', breaker: atSpan(deleteField('startTime')) },
  {
    rule: 'span.endTime not an integer >= 0',
    breaker: atSpan(
      fc.oneof(fc.constantFrom<unknown>(-1, '0', null, true, [], {}, 2 ** 53, 1e300), fc.constant('fraction')).map((v) => (s: Obj) => {
        s.endTime = v === 'fraction' ? (s.endTime as number) + 0.5 : v;
        return '.endTime';
      }),
    ),
  },
  { rule: 'span.endTime missing', breaker: atSpan(deleteField('endTime')) },
  {
    rule: 'span.endTime before startTime',
    breaker: atSpan(
      fc.integer({ min: 1, max: 1_000_000 }).map((d) => (s: Obj) => {
        const end = s.endTime as number;
        s.startTime = end + d;
        return '.endTime';
      }),
    ),
  },
  ...countObjectRules('usage', [
    'inputTokens',
    'outputTokens',
    'totalTokens',
    'reasoningTokens',
    'cachedInputTokens',
    'cacheWriteInputTokens',
    'imageCount',
    'webSearchCount',
    'requestCount',
  ]),
  ...countObjectRules('rateLimit', ['requestsLimit', 'requestsRemaining', 'requestsResetMs', 'tokensLimit', 'tokensRemaining', 'tokensResetMs']),
  {
    rule: 'span.ttftMs not a number >= 0',
    breaker: atSpan(
      setField(
        'ttftMs',
        fc.oneof(fc.double({ max: -Number.MIN_VALUE, noNaN: true, noDefaultInfinity: true }), fc.constantFrom<unknown>('1', null, true, [], {})),
      ),
    ),
  },
  ...chunkRules('chunkOffsets'),
  ...chunkRules('chunkTokens'),
  ...chunkRules('reasoningOffsets'),
  ...chunkRules('reasoningChunkTokens'),
  ...intRules('reasoningDurationMs'),
  ...intRules('modelCallMs'),
  {
    rule: 'span not an object',
    breaker: fc.tuple(fc.nat(), fc.nat(), notObject).map(([n, m, v]) => (p: Obj) => {
      const [t, i] = pick(p.traces as Obj[], n);
      const ss = t.spans as unknown[];
      const j = m % ss.length;
      ss[j] = v;
      return `traces[${i}].spans[${j}]`;
    }),
  },
  { rule: 'span with an unknown field', breaker: atSpan(addUnknown) },
];

/** Rows the flusher moved to the dead-letter files of a data dir. */
function deadLetterRows(dir: string): number {
  const d = path.join(dir, 'dead-letter');
  if (!fs.existsSync(d)) return 0;
  return fs.readdirSync(d).reduce(
    (n, f) =>
      n +
      fs
        .readFileSync(path.join(d, f), 'utf8')
        .split('\n')
        .filter((l) => l !== '').length,
    0,
  );
}

interface Answer {
  status: number;
  body: { accepted?: number; error?: string; issues?: { path: string; message: string }[] };
}

/** Fixed run counts take as long as the machine needs: a loaded machine gets the time, not fewer runs. */
const SLOW = 600_000;

describe('POST /ingest verdicts, generated from the v1 rules', () => {
  let t: TestServer;
  let key: string;
  let orgId: string;
  const acceptedIds = new Set<string>();
  const post = async (p: unknown, k = key): Promise<Answer> => {
    const res = await t.post(p, { key: k });
    return { status: res.status, body: (await res.json()) as Answer['body'] };
  };

  beforeAll(async () => {
    // Bodies at the limits of several 1 MB fields exceed the default 10 MiB; size is not the subject here.
    t = await startTestServer({ INGEST_MAX_BODY_BYTES: String(64 * 1024 * 1024), INGEST_DURABILITY: 'memory' });
    await t.keys.createPlan({ name: 'unlimited', monthlySpans: 1e12, rateLimitRps: 1e6 });
    ({ key, orgId } = await t.newKey('property', 'unlimited'));
  });
  afterAll(async () => t.close());

  it('covers every rule with a breaker', () => {
    const names = RULES.map((r) => r.rule);
    expect(new Set(names).size).toBe(names.length);
    expect(names.length).toBeGreaterThan(120);
  });

  it(
    'accepts every payload that follows the rules, counting its spans',
    async () => {
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(payload, async (p) => {
          runs++;
          const a = await post(p);
          expect(a.status, JSON.stringify(a.body).slice(0, 400)).toBe(202);
          expect(a.body.accepted).toBe(spanCount(p));
          for (const id of spanIds(p)) acceptedIds.add(id);
        }),
        { numRuns: 200, seed: 20261101 },
      );
      // Every run, however slow the machine: no time limit cuts the sample short.
      expect(runs).toBe(200);
    },
    SLOW,
  );

  it(
    'answers 400 naming the broken field when exactly one rule is broken',
    async () => {
      const cases = fc.record({ p: payload, r: fc.nat({ max: RULES.length - 1 }) }).chain(({ p, r }) => {
        const rule = RULES[r] as Rule;
        return rule.breaker.map((b) => ({ p, rule: rule.rule, b }));
      });
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(cases, async ({ p, rule, b }) => {
          runs++;
          const broken = structuredClone(p);
          const path = b(broken);
          const a = await post(broken);
          expect(a.status, `${rule}: ${JSON.stringify(a.body).slice(0, 400)}`).toBe(400);
          expect(typeof a.body.error).toBe('string');
          expect(
            a.body.issues?.map((i) => i.path),
            rule,
          ).toContain(path);
        }),
        { numRuns: 400, seed: 20261102 },
      );
      expect(runs).toBe(400);
    },
    SLOW,
  );

  it('breaks each rule at least once, whatever the sampling above drew', async () => {
    for (const [i, r] of RULES.entries()) {
      const [p] = fc.sample(payload, { numRuns: 1, seed: i + 1 });
      const [b] = fc.sample(r.breaker, { numRuns: 1, seed: i + 1 });
      const broken = structuredClone(p as Obj);
      const path = (b as Breaker)(broken);
      const a = await post(broken);
      expect(a.status, `${r.rule}: ${JSON.stringify(a.body).slice(0, 300)}`).toBe(400);
      expect(
        a.body.issues?.map((x) => x.path),
        r.rule,
      ).toContain(path);
    }
  });

  it('stores every accepted span of the runs above, none in the dead-letter file', async () => {
    expect(acceptedIds.size).toBeGreaterThan(0);
    const rows = await t.spans('SELECT count(*)::INTEGER AS n FROM spans WHERE org_id = ?', [orgId]);
    expect({ stored: rows[0]?.n, deadLettered: deadLetterRows(t.dir) }).toEqual({ stored: acceptedIds.size, deadLettered: 0 });
  });

  it(
    'stores what was sent: ids, names, text and metadata round-trip',
    async () => {
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(payload, async (p) => {
          const ids = spanIds(p);
          fc.pre(new Set(ids).size === ids.length);
          // A `__proto__` metadata key can be dropped: see the named test of that defect below.
          fc.pre(!JSON.stringify(p).includes('"__proto__"'));
          // Nor is a leading byte order mark kept: see the named test of that defect below.
          fc.pre(!JSON.stringify(p).includes('"\uFEFF'));
          runs++;
          const { key: k, orgId: o } = await t.newKey();
          const a = await post(p, k);
          expect(a.status).toBe(202);
          const rows = await t.spans(
            'SELECT trace_id, span_id, name, input, trace_metadata_keys AS tk, trace_metadata_values AS tv, ' +
              'span_metadata_keys AS sk, span_metadata_values AS sv, ttft_ms FROM spans WHERE org_id = ?',
            [o],
          );
          const project = (x: Obj): string => JSON.stringify(x);
          const want: string[] = [];
          for (const tr of p.traces as Obj[]) {
            const tm = (tr.metadata ?? {}) as Obj;
            for (const s of tr.spans as Obj[]) {
              const sm = (s.metadata ?? {}) as Obj;
              want.push(
                project({
                  trace_id: tr.traceId,
                  span_id: s.spanId,
                  name: s.name,
                  input: s.input ?? '',
                  tk: Object.keys(tm),
                  tv: Object.values(tm),
                  sk: Object.keys(sm),
                  sv: Object.values(sm),
                  ttft_ms: s.ttftMs ?? null,
                }),
              );
            }
          }
          const got = rows.map((r) => project(r)).sort();
          want.sort();
          const diff = got.findIndex((g, i) => g !== want[i]);
          const at = (a: string, b: string): number => [...a].findIndex((c, i) => c !== b[i]);
          const g = got[diff] ?? '';
          const w = want[diff] ?? '';
          const c = at(g, w);
          expect(
            diff === -1 ? '' : `stored ${JSON.stringify(g.slice(Math.max(0, c - 60), c + 60))}\nsent   ${JSON.stringify(w.slice(Math.max(0, c - 60), c + 60))}`,
          ).toBe('');
          expect(got.length).toBe(want.length);
        }),
        { numRuns: 25, seed: 20261103 },
      );
      expect(runs).toBe(25);
    },
    SLOW,
  );
});

/**
 * Counter-examples found by the properties above and by test/fuzz, kept as
 * named tests. The ones marked `it.fails` are open defects outside the files
 * this suite may change; each comment names the defect.
 */
describe('POST /ingest counter-examples', () => {
  let t: TestServer;
  let key: string;
  let orgId: string;
  beforeAll(async () => {
    t = await startTestServer({ INGEST_DURABILITY: 'memory' });
    ({ key, orgId } = await t.newKey('counter-examples'));
  });
  afterAll(async () => t.close());

  const spanAt = (startTime: number) =>
    makePayload({ traces: [makeTrace({ traceId: `at-${startTime}`, spans: [makeSpan({ startTime, endTime: startTime })] })] });

  // Found: 2^53 - 1 ms was answered 500 (Date#toISOString throws past 8.64e15),
  // and a start after year 9999 was answered 202 and then dead-lettered (no
  // store holds such a date). Times are now limited to year 9999: 400.
  it.each([Number.MAX_SAFE_INTEGER, Date.UTC(10000, 0, 1)])('answers 400 for a startTime of %d, after year 9999', async (start) => {
    const res = await t.post(spanAt(start), { key });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { issues: { path: string }[] };
    expect(body.issues.map((i) => i.path)).toContain('traces[0].spans[0].startTime');
  });

  // Found: a lone surrogate ("\udc00") was accepted, then refused by DuckDB's
  // JSON reader and dead-lettered. The row encoder now stores U+FFFD in its place.
  it('stores an accepted span whose text holds a lone surrogate, as U+FFFD', async () => {
    const raw =
      '{"version":"v1","traces":[{"traceId":"lone-surrogate","traceName":"a\\udc00b",' +
      '"spans":[{"spanId":"s","spanType":"llm","name":"x","startTime":1,"endTime":2}]}]}';
    const res = await t.post(undefined, { key, raw });
    expect(res.status).toBe(202);
    const rows = await t.spans('SELECT trace_name FROM spans WHERE org_id = ? AND trace_id = ?', [orgId, 'lone-surrogate']);
    expect(rows.map((r) => r.trace_name)).toEqual(['a\ufffdb']);
  });

  it('answers 202 for lone surrogates anywhere in the text (the verdict half of the defect above)', async () => {
    const lone = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
    await fc.assert(
      fc.asyncProperty(fc.array(lone, { minLength: 1, maxLength: 5 }), async (cs) => {
        const res = await t.post(makePayload({ traces: [makeTrace({ traceName: cs.join('x'), spans: [makeSpan({ name: cs.join('') })] })] }), { key });
        expect(res.status).toBe(202);
        await res.body?.cancel();
      }),
      { numRuns: 30, seed: 20261104 },
    );
  });

  const withMetadata = (meta: string, traceName = 'n'): string =>
    `{"version":"v1","traces":[{"traceId":"meta-${meta.length}-${traceName.length}","traceName":${JSON.stringify(traceName)},` +
    `"metadata":${meta},"spans":[{"spanId":"s","spanType":"llm","name":"x","startTime":1,"endTime":2}]}]}`;
  const entries = (n: number): string => Array.from({ length: n }, (_, i) => `"k${i}":"v"`).join(',');

  // Found: zod's record parser copies entries into a fresh object, where an own
  // "__proto__" key vanishes, so 64 entries plus "__proto__" counted as 64. The
  // JSON Schema check, which sees the parsed object as it is, now has the last word.
  it('answers 400 for metadata of 65 entries when one key is "__proto__"', async () => {
    const res = await t.post(undefined, { key, raw: withMetadata(`{"__proto__":"x",${entries(64)}}`) });
    expect(res.status).toBe(400);
  });

  // Found (same cause): an accepted "__proto__" entry was dropped whenever zod decided the batch.
  it('keeps a "__proto__" metadata entry of an accepted batch', async () => {
    const raw = withMetadata('{"__proto__":"x","k":"v"}', '😀'.repeat(200));
    const res = await t.post(undefined, { key, raw });
    expect(res.status).toBe(202);
    const rows = await t.spans('SELECT trace_metadata_keys AS k FROM spans WHERE org_id = ? AND trace_id = ?', [orgId, 'meta-25-400']);
    expect(rows.map((r) => r.k)).toEqual([['__proto__', 'k']]);
  });

  it('keeps a "__proto__" metadata entry when the fast check accepts the batch', async () => {
    const res = await t.post(undefined, { key, raw: withMetadata('{"__proto__":"x","k":"v"}') });
    expect(res.status).toBe(202);
    const rows = await t.spans('SELECT trace_metadata_keys AS k, trace_metadata_values AS v FROM spans WHERE org_id = ? AND trace_id = ?', [
      orgId,
      'meta-25-1',
    ]);
    expect(rows.map((r) => [r.k, r.v])).toEqual([
      [
        ['__proto__', 'k'],
        ['x', 'v'],
      ],
    ]);
    expect(({} as Obj).x).toBeUndefined();
  });

  it('answers 400 for metadata of 65 plain entries and for 66 entries with "__proto__"', async () => {
    for (const meta of [`{${entries(65)}}`, `{"__proto__":"x",${entries(65)}}`, `{"constructor":"x",${entries(64)}}`]) {
      const res = await t.post(undefined, { key, raw: withMetadata(meta) });
      expect(res.status, meta.slice(0, 40)).toBe(400);
      await res.body?.cancel();
    }
  });

  // Found: text beginning with U+FEFF read back without it. The store keeps it
  // (checked here in SQL); @duckdb/node-api drops a leading U+FEFF when it turns
  // a value into a JS string, which affects what the CLI prints, not what is stored.
  it('stores text that begins with a byte order mark as sent', async () => {
    const texts = ['\uFEFF', '\uFEFFa', 'a\uFEFF', 'a\uFEFFb'];
    const traceId = 'bom';
    const spans = texts.map((x, i) => makeSpan({ spanId: `bom-${i}`, name: x, input: x, metadata: { k: x } }));
    const res = await t.post(makePayload({ traces: [makeTrace({ traceId, traceName: 'bom', spans })] }), { key });
    expect(res.status).toBe(202);
    const rows = await t.spans(
      'SELECT length(name) AS n, unicode(name) AS first, name = input AS same, span_metadata_values[1] = name AS meta ' +
        'FROM spans WHERE org_id = ? AND trace_id = ? ORDER BY span_id',
      [orgId, traceId],
    );
    expect(rows.map((r) => [Number(r.n), Number(r.first), r.same, r.meta])).toEqual(texts.map((x) => [x.length, x.codePointAt(0), true, true]));
  });

  it('stores a span that starts at the last millisecond of year 9999', async () => {
    const res = await t.post(spanAt(LAST_STORABLE_MS), { key });
    expect(res.status).toBe(202);
    const rows = await t.spans('SELECT start_time FROM spans WHERE org_id = ? AND trace_id = ?', [orgId, `at-${LAST_STORABLE_MS}`]);
    expect(rows.map((r) => Number(r.start_time))).toEqual([LAST_STORABLE_MS]);
  });
});
