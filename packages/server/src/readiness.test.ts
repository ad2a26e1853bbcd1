import { describe, expect, it } from 'vitest';
import { NotReadyError, Readiness } from './readiness.js';

describe('Readiness', () => {
  it('checks every dependency at once, each bounded, and names the ones that failed or did not answer', async () => {
    let calls = 0;
    const hung = () => {
      calls++;
      return new Promise<void>(() => undefined);
    };
    const r = new Readiness({ fast: () => undefined, down: () => Promise.reject(new Error('refused')), hung }, 100);
    const started = performance.now();
    const e = await r.check().catch((x: unknown) => x);
    expect(performance.now() - started).toBeLessThan(400);
    expect(e).toBeInstanceOf(NotReadyError);
    expect((e as NotReadyError).checks).toEqual({ fast: 'ok', down: 'refused', hung: 'did not answer within 100 ms' });
    expect((e as NotReadyError).message).toBe('down: refused; hung: did not answer within 100 ms');
    // The next probe joins the check still running rather than starting another.
    await r.check().catch(() => undefined);
    expect(calls).toBe(1);
  });

  it('passes when every check passes', async () => {
    await expect(new Readiness({ a: () => undefined, b: () => Promise.resolve() }, 100).check()).resolves.toBeUndefined();
  });
});
