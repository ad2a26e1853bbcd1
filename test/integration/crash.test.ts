import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import { makeSpan, makeTrace } from '../factories.js';
import { startChildServer } from './support/child-server.js';

/**
 * kill -9 under concurrent load: every span answered 202 must be in the
 * store after a restart, exactly once.
 */
describe('crash safety (real child process, kill -9)', () => {
  let dir: string;
  let key: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-crash-'));
    const keys = new SqliteControlStore(path.join(dir, 'trace-ingest.sqlite'));
    await keys.start();
    await keys.createOrg({ name: 'crash' });
    key = (await keys.createKey({ orgName: 'crash' })).key;
    await keys.close();
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('loses no acknowledged span and duplicates none across three crashes', async () => {
    // Inserts of several segments' rows while a backlog waits, so kills land between them and the segments they retire.
    const env = { DATA_DIR: dir, FLUSH_INTERVAL_MS: '50', FLUSH_MAX_ROWS: '500', FLUSH_BACKLOG_MAX_ROWS: '1500', DRAIN_GRACE_MS: '0' };
    const acked = new Set<string>();
    let seq = 0;
    for (let round = 0; round < 3; round++) {
      const child = await startChildServer(env);
      onTestFinished(() => {
        child.proc.kill('SIGKILL');
      });
      let stop = false;
      const client = async () => {
        while (!stop) {
          const n = ++seq;
          const spans = Array.from({ length: 20 }, (_, i) => makeSpan({ spanId: `r${round}-b${n}-s${i}` }));
          const body = JSON.stringify({ version: 'v1', traces: [makeTrace({ traceId: `crash-${n}`, spans })] });
          try {
            const res = await fetch(`${child.url}/ingest`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
              body,
            });
            if (res.status === 202) for (const s of spans) acked.add(`crash-${n}/${s.spanId}`);
            else await res.body?.cancel();
          } catch {
            // The connection died with the server: that batch was never acknowledged.
          }
        }
      };
      const clients = Array.from({ length: 8 }, () => client());
      await new Promise((r) => setTimeout(r, 600 + round * 300));
      child.proc.kill('SIGKILL');
      await child.exited;
      stop = true;
      await Promise.all(clients);
    }
    expect(acked.size).toBeGreaterThan(500);

    // Restart, let the write log replay, then stop cleanly (the drain flushes what is left).
    const child = await startChildServer(env);
    onTestFinished(() => {
      child.proc.kill('SIGKILL');
    });
    child.proc.kill('SIGTERM');
    expect(await child.exited).toBe(0);

    const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
    await store.start();
    onTestFinished(() => store.close());
    const rows = await store.query("SELECT trace_id || '/' || span_id AS id FROM spans");
    const stored = rows.map((r) => r.id as string);
    expect(new Set(stored).size).toBe(stored.length);
    const storedSet = new Set(stored);
    const missing = [...acked].filter((id) => !storedSet.has(id));
    expect(missing).toEqual([]);
    expect(fs.readdirSync(path.join(dir, 'wal')).filter((f) => f.endsWith('.wal') && fs.statSync(path.join(dir, 'wal', f)).size > 0)).toEqual([]);
  });
});
