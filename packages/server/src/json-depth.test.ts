import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { IngestPayload, Span } from '@trace-ingest/shared/schema';
import { validateIngest } from '@trace-ingest/shared/validate';
import { makeSpan, makeTrace } from '../../../test/factories.js';
import { exceedsDepth, MAX_JSON_DEPTH } from './json-depth.js';

const buf = (s: string): Buffer => Buffer.from(s, 'utf8');

/** Nesting depth of a parsed value, the independent answer the guard must agree with. */
function depthOf(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  let deepest = 0;
  for (const child of Object.values(v)) deepest = Math.max(deepest, depthOf(child));
  return 1 + deepest;
}

/** Character-by-character scan with an explicit escape flag, for inputs JSON.parse rejects. */
function naiveExceeds(s: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (const ch of s) {
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === '\\') escaped = true;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '[' || ch === '{') {
      if (++depth > max) return true;
    } else if (ch === ']' || ch === '}') {
      if (depth === 0) return false;
      depth--;
    }
  }
  return false;
}

const nestedArrays = (d: number): string => '['.repeat(d) + ']'.repeat(d);
const nestedObjects = (d: number): string => '{"k":'.repeat(d) + '1' + '}'.repeat(d);

describe('exceedsDepth at the limit', () => {
  it.each([0, 1, 2, 7, MAX_JSON_DEPTH])('accepts arrays nested exactly %i deep and refuses one more', (max) => {
    expect(exceedsDepth(buf(nestedArrays(max)), max)).toBe(false);
    expect(exceedsDepth(buf(nestedArrays(max + 1)), max)).toBe(true);
  });

  it.each([0, 1, 2, 7, MAX_JSON_DEPTH])('accepts objects nested exactly %i deep and refuses one more', (max) => {
    expect(exceedsDepth(buf(nestedObjects(max)), max)).toBe(false);
    expect(exceedsDepth(buf(nestedObjects(max + 1)), max)).toBe(true);
  });

  it('counts arrays and objects alike when mixed', () => {
    const mixed = '{"a":[{"b":[{"c":[1]}]}]}';
    expect(depthOf(JSON.parse(mixed))).toBe(6);
    expect(exceedsDepth(buf(mixed), 6)).toBe(false);
    expect(exceedsDepth(buf(mixed), 5)).toBe(true);
  });

  it('measures nesting, not the number of containers', () => {
    const wide = '[' + Array.from({ length: 10_000 }, () => '[{},[]]').join(',') + ']';
    expect(exceedsDepth(buf(wide), 3)).toBe(false);
    expect(exceedsDepth(buf(wide), 2)).toBe(true);
  });

  it('treats scalars and empty input as depth 0', () => {
    for (const s of ['', '1', 'null', '"["', ' \n\t ']) expect(exceedsDepth(buf(s), 0)).toBe(false);
  });
});

describe('exceedsDepth and strings', () => {
  // Each case is a JSON text and its true depth; JSON.parse confirms the fixture itself.
  const cases: [label: string, json: string, depth: number][] = [
    ['brackets inside a string', String.raw`["[[[[{{{{]]]]}}}}"]`, 1],
    ['a string that is only an escaped backslash, then real nesting', String.raw`["\\",[[1]]]`, 3],
    ['two escaped backslashes, then real nesting', String.raw`["\\\\",[[1]]]`, 3],
    ['an escaped quote right before brackets', String.raw`["\"[[[[",1]`, 1],
    ['an escaped quote right before a closing bracket', String.raw`["\"]]]]","[[["]`, 1],
    ['an escaped backslash then an escaped quote before brackets', String.raw`["\\\"[[[["]`, 1],
    ['an escaped quote at the very start of a string', String.raw`{"k":"\"","n":[[[]]]}`, 4],
    ['a key full of brackets', String.raw`{"[[[\"{{{":{"}}}":[]}}`, 3],
    ['multi-byte UTF-8 around brackets', '["é[😀{", {"ü": ["\u2028]"]}]', 3],
  ];

  it.each(cases)('%s', (_label, json, depth) => {
    expect(depthOf(JSON.parse(json))).toBe(depth);
    expect(exceedsDepth(buf(json), depth)).toBe(false);
    expect(exceedsDepth(buf(json), depth - 1)).toBe(true);
  });

  it('finds the end of strings of every length around the bytes scanned before memchr, escaped quotes included', () => {
    for (let len = 0; len <= 40; len++)
      for (const tail of ['', String.raw`\"`, String.raw`\\`, String.raw`\\\"`]) {
        const text = 'a'.repeat(len) + tail;
        const json = `[${JSON.stringify(text)},"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}[",[[1]]]`;
        expect(depthOf(JSON.parse(json))).toBe(3);
        expect(exceedsDepth(buf(json), 3)).toBe(false);
        expect(exceedsDepth(buf(json), 2)).toBe(true);
      }
  });

  it('stops at an unterminated string without counting what follows', () => {
    expect(exceedsDepth(buf('["' + '['.repeat(100)), 1)).toBe(false);
    expect(exceedsDepth(buf(String.raw`["\"` + '['.repeat(100)), 1)).toBe(false);
  });
});

describe('exceedsDepth on hostile bodies', () => {
  it('refuses 5,000,000 opening brackets', () => {
    expect(exceedsDepth(Buffer.alloc(5_000_000, '['), MAX_JSON_DEPTH)).toBe(true);
  });

  it('refuses a v1 envelope whose traces open 100,000 arrays', () => {
    expect(exceedsDepth(buf('{"version":"v1","traces":' + '['.repeat(100_000)), MAX_JSON_DEPTH)).toBe(true);
  });

  it('refuses deep nesting that follows a long string', () => {
    const body = '{"version":"v1","pad":"' + 'x\\"['.repeat(250_000) + '","traces":' + '['.repeat(MAX_JSON_DEPTH);
    expect(exceedsDepth(buf(body), MAX_JSON_DEPTH)).toBe(true);
  });

  it('returns false for invalid JSON that is not deep, leaving the error to JSON.parse', () => {
    for (const s of ['[}', '{"a":[1,}', 'not json', ']' + '['.repeat(100), '}}}', '[1,2', '{"a" "b"}']) {
      expect(exceedsDepth(buf(s), 2)).toBe(false);
    }
  });
});

describe('exceedsDepth on real v1 payloads', () => {
  // Texts as clients send them: quotes, backslashes, brackets, JSON carried as strings.
  const prose = 'She said "use C:\\temp\\[draft]" and {braces} stay text; ]]] }}} [[[ {{{ \\" \\\\ 😀 ';
  const catalog = JSON.stringify({
    search: { description: 'web search', parameters: { type: 'object', properties: { q: { type: 'array', items: [[{}]] } } } },
  });

  function span(i: number): Span {
    return makeSpan({
      spanType: i % 2 === 0 ? 'llm' : 'tool',
      provider: 'openai',
      modelId: 'gpt-4o',
      status: i % 5 === 0 ? 'error' : 'ok',
      ...(i % 5 === 0 ? { errorMessage: prose } : {}),
      usage: { inputTokens: 1200 + i, outputTokens: 340, totalTokens: 1540 + i, cachedInputTokens: 100, reasoningTokens: 12 },
      rateLimit: { requestsLimit: 500, requestsRemaining: 499 - i, tokensLimit: 30_000, tokensRemaining: 28_000, tokensResetMs: 1200 },
      metadata: { env: 'prod', 'tag[0]': '{"nested":["json"]}', note: prose.slice(0, 60) },
      chunkOffsets: [0, 40, 80, 120],
      chunkTokens: [0, 10, 20, 30],
      input: prose.repeat(4),
      output: prose.repeat(3),
      toolCatalog: catalog,
      safetyMetadata: JSON.stringify([{ category: 'HARM', probability: 'LOW', nested: [[[]]] }]),
      sources: JSON.stringify([{ url: 'https://example.com/a?b=[c]', title: prose }]),
    });
  }

  const payload: IngestPayload = {
    version: 'v1',
    traces: Array.from({ length: 5 }, (_, t) =>
      makeTrace({
        agentName: `agent-${t}`,
        workflowName: 'wf',
        workflowRunId: `run-${t}`,
        sessionId: 's-1',
        customer: { id: `cust-${t}`, name: 'ACME "quoted" [inc]' },
        metadata: { region: 'eu', json: '[[[{}]]]' },
        spans: Array.from({ length: 8 }, (_, s) => span(t * 8 + s)),
      }),
    ),
  };

  it('is a valid v1 payload, 6 levels deep', () => {
    expect(validateIngest(JSON.parse(JSON.stringify(payload))).ok).toBe(true);
    expect(depthOf(payload)).toBe(6);
  });

  it('is accepted compact and pretty-printed, and its depth is counted exactly', () => {
    for (const json of [JSON.stringify(payload), JSON.stringify(payload, null, 2)]) {
      expect(exceedsDepth(buf(json), MAX_JSON_DEPTH)).toBe(false);
      expect(exceedsDepth(buf(json), 6)).toBe(false);
      expect(exceedsDepth(buf(json), 5)).toBe(true);
    }
  });
});

describe('exceedsDepth against reference implementations', () => {
  // Strings biased towards the bytes the guard must not be fooled by.
  const stringUnit = fc.oneof(
    { arbitrary: fc.constantFrom('[', ']', '{', '}', '"', '\\', '\\"', '"[', '\\\\'), weight: 3 },
    { arbitrary: fc.constantFrom('a', ' ', '\n', '\u0000', 'é', '😀', '\u2028'), weight: 1 },
  );
  const jsonValue = fc.jsonValue({ maxDepth: 8, stringUnit });

  it('agrees with the depth of JSON.parse for any JSON value, compact or indented', () => {
    fc.assert(
      fc.property(jsonValue, fc.nat({ max: 10 }), fc.boolean(), (value, max, pretty) => {
        const json = pretty ? JSON.stringify(value, null, 1) : JSON.stringify(value);
        const depth = depthOf(JSON.parse(json));
        expect(exceedsDepth(buf(json), max)).toBe(depth > max);
      }),
      { numRuns: 2000, seed: 20261106 },
    );
  });

  it('never counts a truncated body deeper than the whole', () => {
    fc.assert(
      fc.property(jsonValue, fc.nat({ max: 10 }), fc.double({ min: 0, max: 1, noNaN: true }), (value, max, at) => {
        const whole = buf(JSON.stringify(value));
        const prefix = whole.subarray(0, Math.floor(whole.length * at));
        if (exceedsDepth(prefix, max)) expect(exceedsDepth(whole, max)).toBe(true);
      }),
      { numRuns: 1000, seed: 20261107 },
    );
  });

  it('agrees with a character-by-character scan on arbitrary bracket and quote soup', () => {
    const soup = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', ',', ':', 'é'), maxLength: 60 });
    fc.assert(
      fc.property(soup, fc.nat({ max: 6 }), (s, max) => {
        expect(exceedsDepth(buf(s), max)).toBe(naiveExceeds(s, max));
      }),
      { numRuns: 5000, seed: 20261108 },
    );
  });
});
