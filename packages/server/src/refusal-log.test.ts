import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { BufferFullError, DrainingError, ServiceUnavailableError } from '@trace-ingest/shared/errors';
import { REFUSAL_QUIET_MS, RefusalLog } from './refusal-log.js';

describe('RefusalLog', () => {
  it('logs a refusal when its reason changes or comes back after a quiet spell, never per answer', () => {
    const out: { level: number; msg: string; cause?: string; err?: unknown }[] = [];
    const logger = pino({ level: 'info' }, { write: (l: string) => out.push(JSON.parse(l) as { level: number; msg: string }) });
    let now = 0;
    const log = new RefusalLog(logger, () => now);
    const disk = (freeMiB: number) => new ServiceUnavailableError(`the disk is nearly full (${freeMiB} MiB free)`, 5);
    for (let i = 0; i < 100; i++) log.refused(disk(100 - i), undefined, `r${i}`);
    expect(out).toHaveLength(1);
    log.refused(new BufferFullError(5), undefined, 'b');
    log.refused(new BufferFullError(5), undefined, 'b2');
    expect(out).toHaveLength(2);
    now += REFUSAL_QUIET_MS + 1;
    log.refused(new BufferFullError(5), undefined, 'b3');
    log.refused(new DrainingError(), undefined, 'd');
    expect(out.map((l) => l.level)).toEqual([40, 40, 40, 40]);
    expect(out.every((l) => l.err === undefined)).toBe(true);
    log.refused(new ServiceUnavailableError('key store (PostgreSQL) is unreachable', 2), new Error('connect ECONNREFUSED 127.0.0.1:5432'), 'p');
    expect(out.at(-1)).toMatchObject({ level: 40, cause: 'connect ECONNREFUSED 127.0.0.1:5432' });
  });
});
