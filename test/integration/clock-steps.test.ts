import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { makeBulkPayload } from '../factories.js';
import { startChildServerForTest } from './support/child-server.js';
import { timedIngest } from './support/timed.js';

/** Debian's libfaketime (package faketime). */
const LIBFAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1'].find((f) =>
  fs.existsSync(f),
);

/**
 * The wall clock of a real server process stepped by libfaketime (an NTP
 * correction, a VM resumed) while a key is at its rate limit: the window
 * is timed on the monotonic clock, so the answer is the same as without
 * the step, a 429 whose Retry-After is at most the 1-second window.
 */
describe('rate windows when the wall clock steps', () => {
  for (const step of ['-3600', '+3600']) {
    it(`keeps the window whole when the wall clock steps ${step} s`, async () => {
      expect(LIBFAKETIME, 'libfaketime is missing: apt-get install faketime (scripts/test-fresh.sh does)').toBeDefined();
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-clock-'));
      onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
      const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
      await keys.start();
      await keys.createPlan({ name: 'rps3', monthlySpans: 1_000_000, rateLimitRps: 3 });
      await keys.createOrg({ name: 'acme', planName: 'rps3' });
      const { key } = await keys.createKey({ orgName: 'acme' });
      await keys.close();
      const clock = path.join(dir, 'faketime');
      fs.writeFileSync(clock, '+0\n');
      const server = await startChildServerForTest({
        DATA_DIR: dir,
        LD_PRELOAD: LIBFAKETIME!,
        FAKETIME_TIMESTAMP_FILE: clock,
        // Read the file at every call, so the step takes effect at once; the monotonic clock stays real.
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      });

      // Three in a window pass; the wall clock steps; the fourth of the same window is refused, briefly.
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await timedIngest(server.url, key, makeBulkPayload(1, 1)));
      fs.writeFileSync(clock, `${step}\n`);
      const fourth = await timedIngest(server.url, key, makeBulkPayload(1, 1));
      expect(answers.map((a) => a.status)).toEqual([202, 202, 202]);
      expect(answers.reduce((ms, a) => ms + a.ms, fourth.ms)).toBeLessThan(900);
      expect(fourth.status).toBe(429);
      expect(Number(fourth.retryAfter)).toBe(1);

      // The next window opens a second later, as it would without the step.
      await new Promise((r) => setTimeout(r, 1100));
      expect((await timedIngest(server.url, key, makeBulkPayload(1, 1))).status).toBe(202);
    }, 60_000);
  }
});
