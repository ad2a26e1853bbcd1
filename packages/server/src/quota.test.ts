import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { UsageBatchCount } from '@trace-ingest/store/control-store-types';
import { Metrics } from './metrics.js';
import { ReconcilingQuota, type QuotaCounter } from './quota.js';

/** A counter whose adds wait until the test lets them through, recording what each add sent. */
function gatedCounter(): QuotaCounter & { sent: UsageBatchCount[][]; open: () => void } {
  let release: () => void = () => undefined;
  let gate = new Promise<void>((r) => (release = r));
  const sent: UsageBatchCount[][] = [];
  return {
    sent,
    open: () => release(),
    check: () => Promise.resolve(),
    add: async (_org, batches) => {
      await gate;
      sent.push([...batches]);
      gate = Promise.resolve();
    },
    close: () => Promise.resolve(),
  };
}

describe('ReconcilingQuota', () => {
  it('answers an add at once while the store waits, owes the batch, and sends a resent batch once', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-quota-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const inner = gatedCounter();
    const quota = new ReconcilingQuota(inner, { pendingFile: path.join(dir, 'owed.json'), logger: pino({ level: 'silent' }), metrics: new Metrics() });
    const now = Date.UTC(2026, 10, 20);
    await quota.add('org', [{ id: 'a', spans: 3 }], now);
    await new Promise((r) => setTimeout(r, 10));
    // The first add is held by the store; more come, one of them again.
    await quota.add('org', [{ id: 'b', spans: 2 }], now);
    await quota.add('org', [{ id: 'a', spans: 3 }], now);
    expect(quota.owedSpans('org', '2026-11')).toBe(5);
    await expect(quota.check('org', 5, now)).rejects.toThrow(/quota of 5 spans/);

    inner.open();
    for (let i = 0; i < 50 && quota.owedSpans('org', '2026-11') > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(quota.owedSpans('org', '2026-11')).toBe(0);
    // The second add carried what came in while the first waited, each batch once.
    expect(inner.sent).toEqual([[{ id: 'a', spans: 3 }], [{ id: 'b', spans: 2 }]]);
    await quota.close();
  });
});
