import { describe, expect, it } from 'vitest';
import { validateIngest } from '@trace-ingest/shared/validate';

const span = { spanId: 's1', spanType: 'llm', name: 'call', startTime: 1, endTime: 2 };
const payload = (trace: Record<string, unknown>, s: Record<string, unknown> = {}) => ({
  version: 'v1',
  traces: [{ traceId: 't1', traceName: 'x', spans: [{ ...span, ...s }], ...trace }],
});

describe('validateIngest string lengths (code points, decided by length where it can be)', () => {
  it.each([
    ['256 astral characters (512 UTF-16 units)', '😀'.repeat(256), true],
    ['257 astral characters', '😀'.repeat(257), false],
    ['255 astral characters and one BMP character', '😀'.repeat(255) + 'a', true],
    ['256 lone surrogates (one code point each)', '\ud800'.repeat(256), true],
    ['257 plain characters', 'a'.repeat(257), false],
  ])('traceName of %s', (_n, traceName: string, ok: boolean) => {
    expect(validateIngest(payload({ traceName })).ok).toBe(ok);
  });

  it.each([
    ['an empty spanId', '', false],
    ['one astral character', '😀', true],
    ['one lone surrogate', '\udc00', true],
  ])('minLength: %s', (_n, spanId: string, ok: boolean) => {
    expect(validateIngest(payload({}, { spanId })).ok).toBe(ok);
  });
});
