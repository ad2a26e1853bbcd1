import { describe, expect, it } from 'vitest';
import {
  compileContentPolicy,
  compiledPolicyFor,
  parseContentPolicy,
  serializeContentPolicy,
  validateContentPolicy,
  type ContentPolicy,
} from './content-policy.js';
import type { Trace } from './schema.js';

const all: ContentPolicy = { record: 'full', rules: ['email', 'card', 'api-key'], custom: [] };
const redact = (s: string, p: ContentPolicy = all): string | undefined =>
  compileContentPolicy(p).apply({ traceId: 't', traceName: 'n', spans: [{ spanId: 's', spanType: 'llm', name: 'x', startTime: 1, endTime: 2, input: s }] })
    .spans[0]?.input;

describe('content policy', () => {
  it('redacts e-mail addresses, and leaves an @ that is not one', () => {
    expect(redact('write to jane.doe+ai@mail.example.co.uk today')).toBe('write to [email] today');
    expect(redact('@mention and a@b and user@localhost')).toBe('@mention and a@b and user@localhost');
  });

  it('redacts card numbers that pass the Luhn check, in groups or not, and no other long number', () => {
    expect(redact('card 4111 1111 1111 1111 exp 12/29')).toBe('card [card] exp 12/29');
    expect(redact('amex 3782-822463-10005, visa 4012888888881881')).toBe('amex [card], visa [card]');
    expect(redact('order 4111 1111 1111 1112 and id 1234567890123456')).toBe('order 4111 1111 1111 1112 and id 1234567890123456');
  });

  it('redacts API-key shapes', () => {
    const keys = [
      'sk-proj-AbCdEfGhIjKlMnOpQrStUvWx',
      'sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx',
      'ti_AbCdEfGhIjKlMnOpQrStUvWx',
      'AKIAIOSFODNN7EXAMPLE',
      'ghp_' + 'a'.repeat(36),
      'AIza' + 'b'.repeat(35),
      'xoxb-1234567890-abcdef',
    ];
    for (const k of keys) expect(redact(`key=${k};`), k).toBe('key=[api-key];');
    expect(redact('Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc')).toBe('Authorization: [api-key]');
    expect(redact('a task-list and sk-short')).toBe('a task-list and sk-short');
  });

  it("applies the org's own rules after the built-ins, with their flags", () => {
    const p = validateContentPolicy({
      rules: ['email'],
      custom: [
        { pattern: 'acct-\\d{6,}', replacement: '[account]' },
        { pattern: 'SECRET', flags: 'i', replacement: '***' },
      ],
    });
    expect(redact('acct-1234567 of a@example.com is secret', p)).toBe('[account] of [email] is ***');
  });

  it('covers every span text, error messages and metadata values (not keys), and never changes its input', () => {
    const trace: Trace = {
      traceId: 't',
      traceName: 'ops@example.com stays: a name',
      metadata: { 'owner@example.com': 'owner@example.com' },
      spans: [
        {
          spanId: 's',
          spanType: 'llm',
          name: 'x',
          startTime: 1,
          endTime: 2,
          input: 'a@example.com',
          output: 'b@example.com',
          toolCatalog: 'c@example.com',
          sources: 'd@example.com',
          safetyMetadata: 'e@example.com',
          errorMessage: 'f@example.com',
          metadata: { k: 'g@example.com' },
        },
      ],
    };
    const before = structuredClone(trace);
    const out = compileContentPolicy(all).apply(trace);
    expect(trace).toEqual(before);
    expect(out.traceName).toBe(trace.traceName);
    expect(out.metadata).toEqual({ 'owner@example.com': '[email]' });
    expect(out.spans[0]).toMatchObject({
      input: '[email]',
      output: '[email]',
      toolCatalog: '[email]',
      sources: '[email]',
      safetyMetadata: '[email]',
      errorMessage: '[email]',
      metadata: { k: '[email]' },
    });
  });

  it('keeps no texts under no-text', () => {
    const out = compileContentPolicy({ record: 'no-text', rules: [], custom: [] }).apply({
      traceId: 't',
      traceName: 'n',
      spans: [
        { spanId: 's', spanType: 'llm', name: 'x', startTime: 1, endTime: 2, input: 'i', output: 'o', toolCatalog: 't', sources: 's', safetyMetadata: 'm' },
      ],
    });
    expect(out.spans[0]).toEqual({ spanId: 's', spanType: 'llm', name: 'x', startTime: 1, endTime: 2 });
  });

  it('costs nothing when there is no policy: the same object back', () => {
    const t: Trace = { traceId: 't', traceName: 'n', spans: [{ spanId: 's', spanType: 'llm', name: 'x', startTime: 1, endTime: 2, input: 'a@b.co' }] };
    const p = compiledPolicyFor(null);
    expect(p.active).toBe(false);
    expect(p.apply(t)).toBe(t);
  });

  it('refuses what would not work, saying which rule', () => {
    expect(() => validateContentPolicy({ custom: [{ pattern: '([a-z', replacement: 'x' }] })).toThrow(/rule 1 \("\(\[a-z"\) is not a valid regular expression/);
    expect(() => validateContentPolicy({ rules: ['ssn'] })).toThrow(/rules\.0: .*email.*card.*api-key/);
    expect(() => validateContentPolicy({ custom: [{ pattern: 'x'.repeat(501), replacement: '' }] })).toThrow(/custom\.0\.pattern/);
    expect(() => validateContentPolicy({ custom: [{ pattern: 'x', flags: 'g', replacement: '' }] })).toThrow(/flags may only be i, m, s and u/);
    expect(() => parseContentPolicy('{nope')).toThrow(/not JSON/);
  });

  it('round-trips through its stored form, and compiles a stored policy once', () => {
    const p = validateContentPolicy({ record: 'full', rules: ['card', 'email'], custom: [{ pattern: 'a+', flags: 'i', replacement: 'b' }] });
    expect(p.rules).toEqual(['email', 'card']);
    const json = serializeContentPolicy(p);
    expect(parseContentPolicy(json)).toEqual(p);
    expect(compiledPolicyFor(json)).toBe(compiledPolicyFor(json));
  });
});
