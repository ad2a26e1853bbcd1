import { describe, expect, it } from 'vitest';
import { validatePayload } from '@trace-ingest/shared/schema';

const span = { spanId: 's1', spanType: 'llm', name: 'call', startTime: 1, endTime: 2 };
const trace = { traceId: 't1', traceName: 'x', spans: [span] };

describe('validatePayload', () => {
  it('accepts a minimal payload', () => {
    expect(validatePayload({ version: 'v1', traces: [trace] }).ok).toBe(true);
  });
  it('rejects endTime < startTime with the path', () => {
    const r = validatePayload({ version: 'v1', traces: [{ ...trace, spans: [{ ...span, endTime: 0 }] }] });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.issues[0]?.path).toBe('traces[0].spans[0].endTime');
  });
  it('counts code points for limits', () => {
    const emoji = '😀'.repeat(256);
    expect(validatePayload({ version: 'v1', traces: [{ ...trace, traceName: emoji }] }).ok).toBe(true);
    expect(validatePayload({ version: 'v1', traces: [{ ...trace, traceName: emoji + 'a' }] }).ok).toBe(false);
  });
});
