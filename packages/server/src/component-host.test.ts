import { describe, expect, it } from 'vitest';
import { ComponentHost, type HostLogger } from './component-host.js';

/** A host over parts that record their starts and closes in one list; `failures` are the messages logged. */
function recording(): {
  host: ComponentHost;
  seen: string[];
  failures: string[];
  part(name: string, opts?: { failStart?: boolean; failClose?: boolean }): void;
} {
  const seen: string[] = [];
  const failures: string[] = [];
  const logger: HostLogger = { debug: () => undefined, error: (_obj, msg) => failures.push(msg) };
  const host = new ComponentHost(logger);
  return {
    host,
    seen,
    failures,
    part(name, opts = {}) {
      host.add({
        name,
        start: async () => {
          await Promise.resolve();
          seen.push(`start ${name}`);
          if (opts.failStart === true) throw new Error(`${name} would not start`);
        },
        close: () => {
          seen.push(`close ${name}`);
          if (opts.failClose === true) throw new Error(`${name} would not close`);
        },
      });
    },
  };
}

describe('ComponentHost', () => {
  it('starts the parts in the order they were added and closes them in reverse', async () => {
    const r = recording();
    for (const name of ['a', 'b', 'c']) r.part(name);
    await r.host.start();
    expect(r.seen).toEqual(['start a', 'start b', 'start c']);
    await r.host.close();
    expect(r.seen).toEqual(['start a', 'start b', 'start c', 'close c', 'close b', 'close a']);
  });

  it('on a failed start closes what already started, last first, and rethrows the original error', async () => {
    const r = recording();
    r.part('a');
    r.part('b');
    r.part('c', { failStart: true });
    r.part('d');
    await expect(r.host.start()).rejects.toThrow('c would not start');
    // c cleans up after its own failed start; d never starts.
    expect(r.seen).toEqual(['start a', 'start b', 'start c', 'close b', 'close a']);
    // Nothing is left to close afterwards.
    await r.host.close();
    expect(r.seen).toHaveLength(5);
  });

  it('rethrows the failed start, not a close that failed while unwinding (that one is logged)', async () => {
    const r = recording();
    r.part('a');
    r.part('b', { failClose: true });
    r.part('c', { failStart: true });
    await expect(r.host.start()).rejects.toThrow('c would not start');
    expect(r.seen).toEqual(['start a', 'start b', 'start c', 'close b', 'close a']);
    expect(r.failures).toEqual(['b failed to close; closing the rest']);
  });

  it('closes every part when some fail to close, logs each failure and rejects with them once all were tried', async () => {
    const r = recording();
    r.part('a');
    r.part('b', { failClose: true });
    r.part('c');
    r.part('d', { failClose: true });
    await r.host.start();
    const e = await r.host.close().catch((x: unknown) => x);
    expect(r.seen.slice(4)).toEqual(['close d', 'close c', 'close b', 'close a']);
    expect(r.failures).toEqual(['d failed to close; closing the rest', 'b failed to close; closing the rest']);
    expect(e).toBeInstanceOf(AggregateError);
    expect((e as AggregateError).errors.map((x: Error) => x.message)).toEqual(['d would not close', 'b would not close']);

    const one = recording();
    one.part('a', { failClose: true });
    one.part('b');
    await one.host.start();
    await expect(one.host.close()).rejects.toThrow('a would not close');
    expect(one.seen).toEqual(['start a', 'start b', 'close b', 'close a']);
  });

  it('closes each part once, however often close is called', async () => {
    const r = recording();
    r.part('a');
    r.part('b');
    await r.host.start();
    await Promise.all([r.host.close(), r.host.close()]);
    await r.host.close();
    expect(r.seen).toEqual(['start a', 'start b', 'close b', 'close a']);
  });

  it('stops a start in progress at the next part when closed, and closes what it started', async () => {
    const r = recording();
    let release: () => void = () => undefined;
    r.part('a');
    r.host.add({ name: 'slow', start: () => new Promise<void>((resolve) => (release = resolve)), close: () => void r.seen.push('close slow') });
    r.part('c');
    const started = r.host.start();
    await new Promise((resolve) => setImmediate(resolve));
    const closed = r.host.close();
    release();
    await expect(started).rejects.toThrow('closed while starting, before "c"');
    await closed;
    expect(r.seen).toEqual(['start a', 'close slow', 'close a']);
  });

  it('takes parts with only a start or only a close, starts once and takes no part after starting', async () => {
    const r = recording();
    r.host.add({ name: 'step', start: () => void r.seen.push('step') });
    r.host.add({ name: 'at shutdown', close: () => void r.seen.push('at shutdown') });
    await r.host.start();
    expect(() => r.host.start()).toThrow('starts once');
    expect(() => r.host.add({ name: 'late' })).toThrow('component "late" added after the host started');
    await r.host.close();
    expect(r.seen).toEqual(['step', 'at shutdown']);
  });
});
