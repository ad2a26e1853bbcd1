import type { EraseTarget, RetentionCut } from '@trace-ingest/shared/lifecycle';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { encodeLine, payloadToRows, UNPRICED } from '@trace-ingest/shared/rows';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';
import type { CostChange, SpanStore } from '@trace-ingest/store/span-store';
import { makeBulkPayload } from '../../../test/factories.js';
import { Flusher, splitRecord, splitRows } from './flusher.js';
import { Metrics } from './metrics.js';
import { WriteLog } from './write-log.js';

const ctx = { orgId: 'org_1', keyPrefix: 'ti_prefix123', receivedAt: 1 };
const logger = pino({ level: 'silent' });

function batch(traces: number, spans: number): { buf: Buffer; rows: number } {
  const rows = payloadToRows(makeBulkPayload(traces, spans), ctx, () => UNPRICED);
  return { buf: Buffer.from(rows.map((r) => encodeLine(r) + '\n').join('')), rows: rows.length };
}

/** Fails the first `failures` inserts as a store outage would, then passes through to the real store. */
class OutageStore implements SpanStore {
  readonly kind = 'duckdb';
  readonly rollups = true;
  attempts = 0;
  constructor(
    private readonly inner: SpanStore,
    private failures: number,
  ) {}
  start() {
    return this.inner.start();
  }
  close() {
    return this.inner.close();
  }
  ping() {
    return this.inner.ping();
  }
  query(sql: string, params?: readonly unknown[]) {
    return this.inner.query(sql, params);
  }
  queryStream(sql: string, params?: readonly unknown[]) {
    return this.inner.queryStream(sql, params);
  }
  readOnlyQuery(sql: string, params?: readonly unknown[]) {
    return this.inner.readOnlyQuery(sql, params);
  }
  replaceLines(lines: Buffer, rows: number) {
    return this.inner.replaceLines(lines, rows);
  }
  updateCosts(changes: readonly CostChange[]) {
    return this.inner.updateCosts(changes);
  }
  expire(cut: RetentionCut, maxRows: number) {
    return this.inner.expire(cut, maxRows);
  }
  erase(orgId: string, target: EraseTarget, dryRun: boolean) {
    return this.inner.erase(orgId, target, dryRun);
  }
  disk() {
    return this.inner.disk();
  }
  async insertLines(lines: Buffer, rows: number): Promise<void> {
    this.attempts++;
    if (this.failures-- > 0) throw new Error('connect ECONNREFUSED');
    return this.inner.insertLines(lines, rows);
  }
}

describe('Flusher with a real DuckDB store', () => {
  let dir: string;
  let store: DuckDbSpanStore;
  let log: WriteLog;
  let metrics: Metrics;
  let flushers: Flusher[];
  beforeEach(async () => {
    flushers = [];
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-flush-'));
    store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb') });
    await store.start();
    log = new WriteLog({ dir: path.join(dir, 'wal'), durability: 'fsync', maxBytes: 1 << 30 });
    await log.start();
    metrics = new Metrics({ defaultMetrics: false });
  });
  afterEach(async () => {
    for (const f of flushers) await f.close(1000);
    await log.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const count = async () => Number((await store.query('SELECT count(*)::INTEGER AS n FROM spans'))[0]?.n);
  /** The real store, noting the rows of each insert as it starts. */
  const countingInserts = (): { counting: OutageStore; inserts: number[] } => {
    const inserts: number[] = [];
    const counting = new OutageStore(store, 0);
    const insert = counting.insertLines.bind(counting);
    counting.insertLines = async (lines: Buffer | readonly Buffer[], rows: number) => {
      inserts.push(rows);
      return insert(lines as Buffer, rows);
    };
    return { counting, inserts };
  };
  /** A flusher closed after the test, before the log and store it uses. */
  const built = (f: Flusher): Flusher => {
    flushers.push(f);
    return f;
  };
  const flusherFor = (s: SpanStore, maxRows = 10_000) =>
    built(
      new Flusher(
        log,
        s,
        { intervalMs: 60_000, maxRows, timeoutMs: 5000, deadLetterDir: path.join(dir, 'dead'), minBackoffMs: 5, maxBackoffMs: 20 },
        logger,
        metrics,
      ),
    );

  it('logs a flush that keeps failing once per reason, and its end once; counts every failure', async () => {
    const out: { level: number; msg: string }[] = [];
    const seen = pino({ level: 'info' }, { write: (l: string) => out.push(JSON.parse(l) as { level: number; msg: string }) });
    const seal = log.seal.bind(log);
    let failing = true;
    log.seal = () => (failing ? Promise.reject(Object.assign(new Error('EMFILE: too many open files, open'), { code: 'EMFILE' })) : seal());
    const f = built(new Flusher(log, store, { intervalMs: 10, maxRows: 10_000, timeoutMs: 5000, deadLetterDir: path.join(dir, 'dead') }, seen, metrics));
    f.start();
    const failures = async () => (await metrics.registry.getSingleMetric('trace_ingest_flush_failures_total')?.get())?.values[0]?.value ?? 0;
    const until = async (done: () => boolean | Promise<boolean>) => {
      for (let i = 0; i < 500 && !(await done()); i++) await new Promise((r) => setTimeout(r, 10));
    };
    await until(async () => (await failures()) >= 10);
    expect(await failures()).toBeGreaterThanOrEqual(10);
    failing = false;
    await until(() => out.some((l) => l.msg === 'flushes work again'));
    expect(out.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([expect.stringContaining('flush failed')]);
    expect(out.filter((l) => l.msg === 'flushes work again')).toHaveLength(1);
  });

  it('moves every row into the store in batches of maxRows and retires the segments', async () => {
    for (let i = 0; i < 5; i++) {
      const b = batch(3, 10);
      await log.append(b.buf, b.rows);
    }
    const f = flusherFor(store, 40);
    await f.flushNow();
    expect(await count()).toBe(150);
    expect(log.bytes).toBe(0);
    expect(fs.readdirSync(path.join(dir, 'wal')).filter((n) => n.endsWith('.wal'))).toHaveLength(1);
  });

  it('fills each insert to exactly maxRows while rows wait, cutting records at a line', async () => {
    for (let i = 0; i < 7; i++) {
      const b = batch(3, 10);
      await log.append(b.buf, b.rows);
    }
    const counts: number[] = [];
    const counting = new OutageStore(store, 0);
    const insert = counting.insertLines.bind(counting);
    counting.insertLines = async (lines: Buffer | readonly Buffer[], rows: number) => {
      counts.push(rows);
      expect((Buffer.isBuffer(lines) ? [lines] : lines).reduce((n, c) => n + c.toString().split('\n').length - 1, 0)).toBe(rows);
      return insert(lines as Buffer, rows);
    };
    const f = flusherFor(counting, 64);
    await f.flushNow();
    expect(counts).toEqual([64, 64, 64, 18]);
    expect(await count()).toBe(210);
    const ids = await store.query('SELECT count(DISTINCT (trace_id, span_id))::INTEGER AS n FROM spans');
    expect(ids[0]?.n).toBe(210);
    await f.close(1000);
  });

  it('takes backlog-size inserts across segments only while more than one default insert waits, retiring a segment after its last rows land', async () => {
    const inserts: { rows: number; pending: number[] }[] = [];
    const counting = new OutageStore(store, 0);
    const insert = counting.insertLines.bind(counting);
    counting.insertLines = async (lines: Buffer | readonly Buffer[], rows: number) => {
      inserts.push({ rows, pending: log.pendingSegments().map((s) => s.seq) });
      return insert(lines as Buffer, rows);
    };
    const f = built(
      new Flusher(
        log,
        counting,
        { intervalMs: 60_000, maxRows: 64, backlogMaxRows: 100, timeoutMs: 5000, deadLetterDir: path.join(dir, 'dead') },
        logger,
        metrics,
      ),
    );
    const large = async () => (await metrics.backlogFlushes.get()).values[0]?.value ?? 0;
    // Light traffic: one default insert's worth or less waits.
    for (let i = 0; i < 2; i++) {
      const b = batch(3, 10);
      await log.append(b.buf, b.rows);
    }
    await f.flushNow();
    expect(inserts.map((x) => x.rows)).toEqual([60]);
    expect(await large()).toBe(0);
    // A backlog of three segments (90 + 60 + 60 rows).
    inserts.length = 0;
    const seqs: number[] = [];
    for (const n of [3, 2, 2]) {
      for (let i = 0; i < n; i++) {
        const b = batch(3, 10);
        await log.append(b.buf, b.rows);
      }
      seqs.push((await log.seal()).at(-1)!.seq);
    }
    await f.flushNow();
    expect(inserts.map((x) => x.rows)).toEqual([100, 100, 10]);
    expect(await large()).toBe(2);
    // The second segment's rows are in the first two inserts: it stays in the log until the second is confirmed.
    expect(inserts.map((x) => x.pending)).toEqual([seqs, seqs.slice(1), seqs.slice(2)]);
    expect(log.bytes).toBe(0);
    expect(await count()).toBe(270);
    const ids = await store.query('SELECT count(DISTINCT (trace_id, span_id))::INTEGER AS n FROM spans');
    expect(ids[0]?.n).toBe(270);
  });

  it('gathers sustained traffic into one backlog-size insert, and flushes a burst once its rate falls', async () => {
    const { counting, inserts } = countingInserts();
    const opts = {
      intervalMs: 20,
      maxRows: 64,
      backlogMaxRows: 200,
      gatherMs: 10_000,
      gatherMinRate: 100,
      timeoutMs: 5000,
      deadLetterDir: path.join(dir, 'dead'),
    };
    const f = built(new Flusher(log, counting, opts, logger, metrics));
    f.start();
    // 200 rows in quick succession: past maxRows the writes are left to gather, and the backlog's size flushes them at once.
    for (let i = 0; i < 5; i++) {
      const b = batch(4, 10);
      await log.append(b.buf, b.rows);
      f.notify();
      await new Promise((r) => setTimeout(r, 5));
    }
    await vi.waitFor(() => expect(inserts).toEqual([200]), { timeout: 5000 });
    // A burst of 100 rows, then nothing: gathered while it holds 100 rows a second since the last flush (one second).
    await f.idle();
    const b = batch(10, 10);
    await log.append(b.buf, b.rows);
    f.notify();
    await new Promise((r) => setTimeout(r, 300));
    expect(inserts).toEqual([200]);
    await vi.waitFor(() => expect(inserts).toEqual([200, 100]), { timeout: 5000 });
    await f.idle();
    expect(await count()).toBe(300);
    expect(log.bytes).toBe(0);
    await f.close(1000);
  });

  it('never gathers rows that fill a quarter of the write log', async () => {
    const b = batch(4, 10);
    await log.close();
    log = new WriteLog({ dir: path.join(dir, 'wal-small'), durability: 'fsync', maxBytes: 3 * b.buf.length });
    await log.start();
    const opts = {
      intervalMs: 20,
      maxRows: 64,
      backlogMaxRows: 10_000,
      gatherMs: 60_000,
      gatherMinRate: 1,
      timeoutMs: 5000,
      deadLetterDir: path.join(dir, 'dead'),
    };
    const f = built(new Flusher(log, store, opts, logger, metrics));
    f.start();
    await log.append(b.buf, b.rows);
    f.notify();
    await vi.waitFor(async () => expect(await count()).toBe(40), { timeout: 5000 });
    await f.close(1000);
  });

  it('flushes every tick with gathering off, as light traffic is', async () => {
    const { counting, inserts } = countingInserts();
    const f = built(
      new Flusher(log, counting, { intervalMs: 20, maxRows: 64, backlogMaxRows: 200, timeoutMs: 5000, deadLetterDir: path.join(dir, 'dead') }, logger, metrics),
    );
    f.start();
    const b = batch(5, 10);
    await log.append(b.buf, b.rows);
    f.notify();
    await vi.waitFor(() => expect(inserts).toEqual([50]), { timeout: 2000 });
    await f.close(1000);
  });

  it('replays a backlog whose large insert failed before it was confirmed, once', async () => {
    for (let s = 0; s < 2; s++) {
      const b = batch(3, 10);
      await log.append(b.buf, b.rows);
      await log.seal();
    }
    const down = new OutageStore(store, Number.POSITIVE_INFINITY);
    const opts = {
      intervalMs: 60_000,
      maxRows: 20,
      backlogMaxRows: 100,
      timeoutMs: 5000,
      deadLetterDir: path.join(dir, 'dead'),
      minBackoffMs: 5,
      maxBackoffMs: 20,
    };
    const f = built(new Flusher(log, down, opts, logger, metrics));
    f.kick();
    await vi.waitFor(() => expect(down.attempts).toBeGreaterThanOrEqual(2), { timeout: 2000 });
    await f.close(100);
    expect(log.pendingSegments()).toHaveLength(2);
    // The next start: both segments are read again and stored once.
    await log.close();
    log = new WriteLog({ dir: path.join(dir, 'wal'), durability: 'fsync', maxBytes: 1 << 30 });
    await log.start();
    await built(new Flusher(log, store, opts, logger, metrics)).flushNow();
    expect(await count()).toBe(60);
    expect(log.bytes).toBe(0);
    expect((await metrics.backlogFlushes.get()).values[0]?.value).toBe(1);
  });

  it('keeps each insert under maxBytes, splitting a large record at line boundaries', async () => {
    const big = batch(4, 50);
    await log.append(big.buf, big.rows);
    const small = batch(1, 3);
    await log.append(small.buf, small.rows);
    const sizes: number[] = [];
    const counting = new OutageStore(store, 0);
    const insert = counting.insertLines.bind(counting);
    counting.insertLines = async (lines: Buffer | readonly Buffer[], rows: number) => {
      sizes.push((Buffer.isBuffer(lines) ? [lines] : lines).reduce((n, c) => n + c.length, 0));
      return insert(lines as Buffer, rows);
    };
    const maxBytes = Math.ceil(big.buf.length / 7);
    const f = built(
      new Flusher(log, counting, { intervalMs: 60_000, maxRows: 10_000, maxBytes, timeoutMs: 5000, deadLetterDir: path.join(dir, 'dead') }, logger, metrics),
    );
    await f.flushNow();
    expect(await count()).toBe(203);
    expect(sizes.length).toBeGreaterThanOrEqual(7);
    for (const n of sizes) expect(n).toBeLessThanOrEqual(maxBytes);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(big.buf.length + small.buf.length);
  });

  it('keeps rows through a store outage and retries until they land', async () => {
    const b = batch(2, 5);
    await log.append(b.buf, b.rows);
    const flaky = new OutageStore(store, 4);
    const f = flusherFor(flaky);
    await f.flushNow();
    expect(flaky.attempts).toBe(5);
    expect(await count()).toBe(10);
    expect(await metrics.storeErrors.get()).toMatchObject({ values: [{ value: 4 }] });
  });

  it('dead-letters only the rows the store refuses, with the reason', async () => {
    const good = batch(1, 6);
    const lines = good.buf.toString().split('\n').filter(Boolean);
    const bad = JSON.stringify({ org_id: 'org_1', trace_id: 'x', span_id: 'bad', start_time: 'yesterday' });
    lines.splice(3, 0, bad);
    await log.append(Buffer.from(lines.join('\n') + '\n'), lines.length);
    const f = flusherFor(store);
    await f.flushNow();
    expect(await count()).toBe(6);
    const [file] = fs.readdirSync(path.join(dir, 'dead'));
    const entries = fs
      .readFileSync(path.join(dir, 'dead', file!), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { reason: string; row: string });
    expect(entries).toHaveLength(1);
    expect(entries[0]?.row).toBe(bad);
    expect(entries[0]?.reason).toMatch(/Conversion Error|Invalid Input/);
    expect(log.bytes).toBe(0);
  });

  it('replays segments left by an earlier run, once', async () => {
    const b = batch(2, 3);
    await log.append(b.buf, b.rows);
    // The earlier run inserted the rows but died before retiring the segment.
    await store.insertLines(b.buf, b.rows);
    await log.close();
    log = new WriteLog({ dir: path.join(dir, 'wal'), durability: 'fsync', maxBytes: 1 << 30 });
    await log.start();
    expect(log.pendingSegments()).toHaveLength(1);
    const f = flusherFor(store);
    await f.flushNow();
    expect(await count()).toBe(6);
  });

  it('gives up at the drain timeout and leaves the rows in the log', async () => {
    const b = batch(1, 2);
    await log.append(b.buf, b.rows);
    const down = new OutageStore(store, Number.POSITIVE_INFINITY);
    const f = flusherFor(down);
    f.start();
    f.kick();
    // The buffer gauges move while the flush retries, not only when one succeeds.
    await vi.waitFor(async () => expect((await metrics.bufferRows.get()).values[0]?.value).toBe(b.rows), { timeout: 2000 });
    expect((await metrics.bufferBytes.get()).values[0]?.value).toBe(log.bytes);
    await f.close(200);
    expect(log.bytes).toBeGreaterThan(0);
    expect(await count()).toBe(0);
  });
  it('keeps rows in the log while the store is one column short (retried, never dead-lettered), and stores them once migrated', async () => {
    const file = path.join(dir, 'spans.duckdb');
    await store.close();
    const raw = await DuckDBInstance.create(file);
    const c = await raw.connect();
    await c.run('ALTER TABLE spans DROP COLUMN system_fingerprint');
    c.closeSync();
    raw.closeSync();
    store = new DuckDbSpanStore({ file });
    await store.start();
    const b = batch(2, 5);
    await log.append(b.buf, b.rows);
    const f = flusherFor(store);
    f.start();
    f.kick();
    await vi.waitFor(async () => expect((await metrics.storeErrors.get()).values[0]?.value).toBeGreaterThanOrEqual(3), { timeout: 5000 });
    await f.close(200);
    expect(fs.existsSync(path.join(dir, 'dead'))).toBe(false);
    expect(log.bytes).toBeGreaterThan(0);
    // The upgrade's migration adds the column; the next start applies it and the rows land.
    await store.close();
    const migrations = path.join(dir, 'migrations');
    fs.mkdirSync(migrations);
    const shipped = new URL('../../../migrations/duckdb/', import.meta.url);
    for (const name of fs.readdirSync(shipped)) fs.copyFileSync(new URL(name, shipped), path.join(migrations, name));
    fs.writeFileSync(path.join(migrations, '9999_fingerprint.sql'), "ALTER TABLE spans ADD COLUMN IF NOT EXISTS system_fingerprint VARCHAR DEFAULT '';\n");
    store = new DuckDbSpanStore({ file, migrationsDir: pathToFileURL(migrations + '/') });
    await store.start();
    await flusherFor(store).flushNow();
    expect(await count()).toBe(b.rows);
    expect(log.bytes).toBe(0);
    expect(fs.existsSync(path.join(dir, 'dead'))).toBe(false);
  });
  it('stores the records around a damaged one, dead-letters its bytes with the reason, and counts the spans', async () => {
    const batches = Array.from({ length: 39 }, (_, i) => batch(1, 25 + (i % 2)));
    for (const b of batches) await log.append(b.buf, b.rows);
    const [seg] = await log.seal();
    const second = 20 + batches[0]!.buf.length;
    const fd = fs.openSync(seg!.file, 'r+');
    fs.writeSync(fd, Buffer.from([0xde, 0xad, 0xbe, 0xef]), 0, 4, second + 30);
    fs.closeSync(fd);
    await flusherFor(store).flushNow();
    const total = batches.reduce((n, b) => n + b.rows, 0);
    expect(await count()).toBe(total - batches[1]!.rows);
    expect(log.bytes).toBe(0);
    const dead = fs.readdirSync(path.join(dir, 'dead'));
    const damage = dead.filter((f) => f.endsWith('.wal-damage'));
    expect(damage).toHaveLength(1);
    expect(fs.statSync(path.join(dir, 'dead', damage[0]!)).size).toBe(20 + batches[1]!.buf.length);
    const [entry] = fs
      .readFileSync(
        path.join(
          dir,
          'dead',
          dead.find((f) => f.endsWith('.ndjson'))!,
        ),
        'utf8',
      )
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { reason: string; spans: number });
    expect(entry).toMatchObject({ spans: batches[1]!.rows, reason: expect.stringMatching(/damaged record/) as unknown });
    expect((await metrics.walUnreadableSpans.get()).values[0]?.value).toBe(batches[1]!.rows);
  });

  it('goes on past a segment removed before it was stored, and counts it', async () => {
    const a = batch(1, 3);
    await log.append(a.buf, a.rows);
    const [first] = await log.seal();
    const b = batch(1, 4);
    await log.append(b.buf, b.rows);
    fs.rmSync(first!.file);
    await flusherFor(store).flushNow();
    expect(await count()).toBe(b.rows);
    expect(log.bytes).toBe(0);
    expect((await metrics.walMissingSegments.get()).values[0]?.value).toBe(1);
  });
});

describe('splitRows', () => {
  it('cuts a record after its n-th line, as views', () => {
    const payload = Buffer.from('a\nbb\nccc\n');
    const [head, rest] = splitRows({ payload, rows: 3 }, 2);
    expect(head).toEqual({ payload: Buffer.from('a\nbb\n'), rows: 2 });
    expect(rest).toEqual({ payload: Buffer.from('ccc\n'), rows: 1 });
    expect(head.payload.buffer).toBe(payload.buffer);
    expect(() => splitRows({ payload, rows: 5 }, 4)).toThrow(/fewer lines/);
  });
});

describe('splitRecord', () => {
  const lines = (lens: number[]) => Buffer.from(lens.map((n, i) => String.fromCharCode(97 + (i % 26)).repeat(n) + '\n').join(''));

  it('keeps a record within the limit whole, without copying it', () => {
    const r = { payload: lines([10, 20]), rows: 2 };
    const pieces = [...splitRecord(r, 100)];
    expect(pieces).toHaveLength(1);
    // The record's own buffer, not an equal copy of it.
    expect(pieces[0]?.payload).toBe(r.payload);
    expect(pieces[0]?.rows).toBe(2);
  });

  it('cuts after newlines into pieces of at most maxBytes, a longer line alone, rows counted', () => {
    const lens = [5, 30, 7, 7, 7, 80, 3, 3, 3, 3, 3, 3, 3, 40, 1];
    const payload = lines(lens);
    for (const max of [9, 10, 20, 33, 64, 200]) {
      const pieces = [...splitRecord({ payload, rows: lens.length }, max)];
      expect(Buffer.concat(pieces.map((p) => p.payload)).equals(payload)).toBe(true);
      expect(pieces.reduce((n, p) => n + p.rows, 0)).toBe(lens.length);
      for (const p of pieces) {
        // Views into the record's memory, not copies.
        expect(p.payload.buffer).toBe(payload.buffer);
        expect(p.payload.byteOffset).toBeGreaterThanOrEqual(payload.byteOffset);
        expect(p.payload.byteOffset + p.payload.length).toBeLessThanOrEqual(payload.byteOffset + payload.length);
        expect(p.payload[p.payload.length - 1]).toBe(10);
        expect(p.rows).toBe(p.payload.toString().split('\n').length - 1);
        if (p.payload.length > max) expect(p.rows).toBe(1);
      }
    }
  });
});
