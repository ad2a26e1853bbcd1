import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';

describe('createLogger', () => {
  it('falls back to JSON lines with one warning when LOG_PRETTY is set but pino-pretty is not installed (the production image)', () => {
    const out = new PassThrough();
    const lines: string[] = [];
    out.on('data', (c: Buffer) => lines.push(...c.toString().trim().split('\n')));
    const logger = createLogger({ level: 'info', pretty: true, destination: out }, () => false);
    logger.info('hello');
    const parsed = lines.map((l) => JSON.parse(l) as { msg: string; level: number });
    expect(parsed.map((p) => p.msg)).toEqual([expect.stringMatching(/pino-pretty is not installed/), 'hello']);
  });
});
