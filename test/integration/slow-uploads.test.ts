import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeBulkPayload } from '../factories.js';
import { startTestServer } from './support/ingest-server.js';

/**
 * Clients trickling large bodies (9 MB at ~10 KB/s) while others send small
 * gzip'd batches, as the SDK and the OTel exporters do by default: the slow
 * senders must not hold the memory slots the small batches need, and a
 * sender too slow to fill its slot is cut off.
 */

interface Trickle {
  status: Promise<number>;
  stop: () => void;
}

function trickle(url: string, key: string, size: number): Trickle {
  const req = http.request(`${url}/ingest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': String(size), authorization: `Bearer ${key}` },
  });
  const status = new Promise<number>((resolve) => {
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    // Cut off before an answer could be read: count it as refused.
    req.once('error', () => resolve(-1));
  });
  req.write('{"version":"v1","traces":[');
  const timer = setInterval(() => req.write(Buffer.alloc(10_000, 0x20)), 1000);
  const stop = () => {
    clearInterval(timer);
    req.destroy();
  };
  onTestFinished(stop);
  return { status, stop };
}

describe('slow large uploads', () => {
  it('stall no small compressed batch, and are cut off for holding a slot they do not fill', async () => {
    const t = await startTestServer({ MAX_CONCURRENT_BODIES: '2', BODY_MIN_BYTES_PER_SEC: '65536', REQUEST_TIMEOUT_MS: '60000' });
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    const slow = Array.from({ length: 4 }, () => trickle(t.url, key, 9_000_000));
    await new Promise((r) => setTimeout(r, 300));

    const started = performance.now();
    for (let i = 0; i < 5; i++) {
      const body = gzipSync(JSON.stringify(makeBulkPayload(1, 5)));
      const res = await fetch(`${t.url}/ingest`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', authorization: `Bearer ${key}` },
        body,
      });
      expect(res.status).toBe(202);
    }
    // Five small gzip'd batches, answered while every slot is held by a trickling sender (before: each waited for a slot).
    expect(performance.now() - started).toBeLessThan(3000);

    const statuses = await Promise.all(slow.map((s) => s.status));
    // The two holding a slot were cut off with 408 after one 5 s window; the two waiting got their slot and then the same.
    expect(statuses.every((s) => s === 408 || s === -1)).toBe(true);
    expect(statuses.filter((s) => s === 408).length).toBeGreaterThan(0);
    expect(await t.spans('SELECT count(*)::INT AS n FROM spans')).toEqual([{ n: 25 }]);
  });
});
