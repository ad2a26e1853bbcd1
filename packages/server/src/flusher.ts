import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { backoffMs } from '@trace-ingest/shared/backoff';
import { utcDay } from '@trace-ingest/shared/dates';
import { segmentName } from '@trace-ingest/shared/wal-files';
import { SpanStoreRejectedError, type Lines, type SpanStore } from '@trace-ingest/store/span-store';
import type { Metrics } from './metrics.js';
import { countLines, type SegmentInfo, type SegmentTail, type WalDamage, type WalRecord, type WriteLog } from './write-log.js';

export interface FlusherOptions {
  intervalMs: number;
  /** Called after rows reached the store (budgets look at the new spend). */
  onStored?: () => void;
  maxRows: number;
  /** The largest insert in bytes; a larger record is split at line boundaries. Default: no limit. */
  maxBytes?: number;
  /** The insert's rows and bytes while more than one insert of maxRows / maxBytes waits (never less than those); default: the same. */
  backlogMaxRows?: number;
  backlogMaxBytes?: number;
  /**
   * Sustained traffic (rows written since the last flush began at `gatherMinRate` per second or more): a tick leaves
   * them to gather for up to this long from then, until a backlog insert's worth waits, which DuckDB writes to its file
   * once instead of through its own log and a checkpoint. 0 (the default): every tick flushes.
   */
  gatherMs?: number;
  gatherMinRate?: number;
  timeoutMs: number;
  deadLetterDir: string;
  /** Backoff bounds for a failing store; jitter is applied on top. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

class InsertTimeoutError extends Error {
  constructor(ms: number) {
    super(`insert did not finish within ${ms} ms`);
  }
}

/**
 * Moves rows from the write log into the span store: every `intervalMs`, or
 * as soon as `maxRows` wait. One insert at a time, each with a timeout; a
 * failing store is retried forever with exponential backoff and jitter, and
 * a segment is retired only after all of its rows were confirmed. While more
 * than one insert waits (a backlog) inserts take `backlogMaxRows` rows, which
 * cost the store less per row than small ones, so only sustained traffic
 * spends the memory of a large insert; sustained traffic that keeps up is
 * gathered for one (`gatherMs`) rather than flushed every tick. Rows the
 * store refuses permanently are isolated by bisection and written to a
 * dead-letter file, so they never block the rows behind them.
 */
export class Flusher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopping = false;
  private storeHealthy = true;
  /** Why the last insert failed, while inserts fail. */
  private storeFailure: unknown;
  private flushFailure: unknown;
  private readonly minBackoff: number;
  private readonly maxBytes: number;
  private readonly backlog: { rows: number; bytes: number };
  private readonly maxBackoff: number;
  /** When the last flush sealed the segment rows were written to: the rows written since are at most this old. */
  private sealedAt = performance.now();
  private wakeBackoff: (() => void) | undefined;
  /** The reason flushes fail for, and how many failed, while they do. */
  private failing: { reason: string; count: number } | undefined;

  constructor(
    private readonly log: WriteLog,
    private readonly store: SpanStore,
    private readonly opts: FlusherOptions,
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {
    this.minBackoff = opts.minBackoffMs ?? 100;
    this.maxBytes = opts.maxBytes ?? Number.POSITIVE_INFINITY;
    this.backlog = {
      rows: Math.max(opts.backlogMaxRows ?? opts.maxRows, opts.maxRows),
      bytes: Math.max(opts.backlogMaxBytes ?? this.maxBytes, this.maxBytes),
    };
    this.maxBackoff = opts.maxBackoffMs ?? 30_000;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      if (!this.gathering()) this.kick();
      // The gauges move while a flush retries, not only when one succeeds.
      this.updateGauges();
    }, this.opts.intervalMs);
    this.timer.unref();
    const missing = this.log.missingAtStart;
    if (missing.length > 0) {
      this.metrics.walMissingSegments.inc(missing.length);
      const known = missing.filter((m) => m.spans !== undefined);
      this.logger.error(
        {
          missing: missing.slice(0, 20).map((m) => ({ segment: segmentName(m.seq), position: m.position, spans: m.spans ?? 'unknown' })),
          count: missing.length,
          spans: known.reduce((n, m) => n + (m.spans ?? 0), 0),
          spansUnknownIn: missing.length - known.length,
        },
        'write log segments the checkpoint expects are missing: they were removed before their spans were stored, and those acknowledged spans are lost',
      );
    }
    // Segments left by an earlier run are replayed at once, beside new traffic.
    if (this.log.pendingSegments().length > 0) this.kick();
  }

  /** Called after each append: flush early once enough rows wait (a backlog insert's worth while they are gathered). */
  notify(): void {
    if (this.log.activeRows >= this.opts.maxRows && !this.gathering()) this.kick();
  }

  /**
   * Whether a tick leaves the rows written since the last flush to gather: they arrive at a sustained rate, are short
   * of a backlog insert, have waited less than gatherMs, fill under a quarter of the write log (a gather never causes
   * backpressure), and no sealed segment waits (a replay or a backlog is flushed at once).
   */
  private gathering(): boolean {
    const ms = this.opts.gatherMs ?? 0;
    if (ms <= 0) return false;
    const rows = this.log.unsealedRows;
    const age = performance.now() - this.sealedAt;
    return (
      age < ms &&
      rows * 1000 >= (this.opts.gatherMinRate ?? 0) * age &&
      rows < this.backlog.rows &&
      this.log.activeBytes < this.backlog.bytes &&
      this.log.bytes < this.log.maxBytes / 4 &&
      this.log.pendingSegments().length === 0
    );
  }

  /** Starts a flush unless one is running. */
  kick(): void {
    if (this.running !== undefined || this.stopping) return;
    this.running = this.flushAll()
      .then(
        () => this.flushFailed(undefined),
        (e: unknown) => this.flushFailed(e),
      )
      .finally(() => {
        this.running = undefined;
        this.updateGauges();
      });
  }

  /** A failed flush is logged when its reason changes (not every interval), its end once; each is counted. */
  private flushFailed(e: unknown): void {
    if (e === undefined) {
      if (this.failing !== undefined) this.logger.info({ failedFlushes: this.failing.count }, 'flushes work again');
      this.failing = undefined;
      return;
    }
    this.metrics.flushFailures.inc();
    const reason = (e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e));
    if (this.failing?.reason === reason) {
      this.failing.count++;
      return;
    }
    this.failing = { reason, count: 1 };
    this.logger.error({ err: e }, 'flush failed; retried every flush interval (logged again when the reason changes)');
  }

  /** Resolves when the current flush (if any) is over. */
  async idle(): Promise<void> {
    while (this.running !== undefined) await this.running;
  }

  /** Flushes everything now; used by tests and by shutdown. */
  async flushNow(): Promise<void> {
    await this.idle();
    this.running = this.flushAll().finally(() => {
      this.running = undefined;
      this.updateGauges();
    });
    await this.running;
  }

  /**
   * Stops the timer and makes a last attempt to flush, bounded by
   * `timeoutMs`; what is left stays in the log for the next start.
   */
  async close(timeoutMs: number): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    const last = (async () => {
      await this.idle();
      if (!this.stopping) await this.flushNow();
    })();
    let t: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => {
      t = setTimeout(() => resolve('timeout'), timeoutMs);
      t.unref();
    });
    const outcome = await Promise.race([last.then(() => 'done' as const), deadline]);
    clearTimeout(t);
    this.stopping = true;
    this.wakeBackoff?.();
    if (outcome === 'timeout') {
      this.logger.warn({ pendingBytes: this.log.bytes }, 'drain timeout reached; unflushed rows stay in the write log for the next start');
    }
    await last.catch(() => undefined);
  }

  private updateGauges(): void {
    this.metrics.bufferBytes.set(this.log.bytes);
    this.metrics.bufferSegments.set(this.log.segmentCount);
    this.metrics.bufferRows.set(this.log.rows);
  }

  /** Why the last flush failed before it reached the store (no file handle left, an unreadable segment); undefined once one succeeds. */
  flushProblem(): string | undefined {
    const e = this.flushFailure;
    if (e === undefined) return undefined;
    return `write log cannot be flushed (retrying): ${e instanceof Error ? e.message : String(e)}`;
  }

  private async flushAll(): Promise<void> {
    try {
      await this.flushSegments();
      this.flushFailure = undefined;
    } catch (e) {
      this.flushFailure = e;
      throw e;
    }
  }

  /**
   * One pass over the segments sealed now. An insert may take rows of
   * several segments; a segment is retired once the insert holding its last
   * rows is confirmed, so a crash before that replays it (the store keeps
   * one copy of each span) and never loses it.
   */
  private async flushSegments(): Promise<void> {
    const segments = await this.log.seal();
    this.sealedAt = performance.now();
    // Rows gathered past a default insert (segments sealed by this process know their rows) take the backlog's size from the first insert.
    const known = segments.reduce((n, s) => ({ rows: n.rows + s.rows, bytes: n.bytes + s.bytes }), { rows: 0, bytes: 0 });
    let limit = known.rows > this.opts.maxRows || known.bytes > this.maxBytes ? this.backlog : { rows: this.opts.maxRows, bytes: this.maxBytes };
    // Records are read one at a time and handed to the store as they are,
    // never copied into one buffer. An insert takes exactly limit.rows rows
    // while the segments have them, a record being cut at a line to fill it:
    // DuckDB writes whole row groups of a large insert straight to its file,
    // and rows short of them through its own log first, which costs more.
    let batch: Buffer[] = [];
    let rows = 0;
    let bytes = 0;
    const over = (l: { rows: number; bytes: number }, len: number): boolean => rows > 0 && (rows >= l.rows || bytes + len > l.bytes);
    // Segments read to their end whose last rows are in `batch`.
    let read: { seg: SegmentInfo; tail: SegmentTail }[] = [];
    const insert = async (): Promise<boolean> => {
      if (rows > 0) {
        if (!(await this.insertWithRetry(batch, rows))) return false;
        if (rows > this.opts.maxRows || bytes > this.maxBytes) this.metrics.backlogFlushes.inc();
        batch = [];
        rows = 0;
        bytes = 0;
      }
      for (const r of read) await this.finishSegment(r.seg, r.tail);
      read = [];
      return true;
    };
    for (const seg of segments) {
      if (this.stopping) return;
      if (
        !(await fs.access(seg.file).then(
          () => true,
          () => false,
        ))
      ) {
        // Removed under the running server: nothing left to store, and nothing to wait for.
        this.metrics.walMissingSegments.inc();
        this.logger.error(
          { segment: path.basename(seg.file), spans: this.log.spansOf(seg) ?? 'unknown' },
          'a write log segment was removed before its spans were stored: those acknowledged spans are lost',
        );
        await this.log.retire(seg);
        continue;
      }
      const tail: SegmentTail = { tornBytes: 0 };
      for await (const record of this.log.records(seg, tail)) {
        for (const piece of splitRecord(record, limit.bytes)) {
          let r: WalRecord | undefined = piece;
          while (r !== undefined) {
            // A row past a full default insert means more than one waits: the rest of the pass takes the backlog's size.
            if (over(limit, r.payload.length)) limit = this.backlog;
            if (over(limit, r.payload.length) && !(await insert())) return;
            const [head, rest]: [WalRecord, WalRecord | undefined] = r.rows > limit.rows - rows ? splitRows(r, limit.rows - rows) : [r, undefined];
            batch.push(head.payload);
            rows += head.rows;
            bytes += head.payload.length;
            r = rest;
          }
        }
      }
      read.push({ seg, tail });
      // A segment none of whose rows wait is done now.
      if (rows === 0 && !(await insert())) return;
    }
    await insert();
  }

  /** After every row of a segment is in the store: its damaged records dead-lettered, its torn tail reported, the segment retired. */
  private async finishSegment(seg: SegmentInfo, tail: SegmentTail): Promise<void> {
    if (tail.damaged !== undefined) await this.deadLetterDamage(seg, tail.damaged);
    if (tail.tornBytes > 0) {
      this.logger.warn(
        { segment: path.basename(seg.file), tornBytes: tail.tornBytes },
        'write log segment ends in a torn record (a write interrupted by a crash, never acknowledged); ignoring it',
      );
    }
    await this.log.retire(seg);
    this.updateGauges();
  }

  /** False only when stopping interrupted the retries. */
  private async insertWithRetry(chunks: readonly Buffer[], rows: number): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.insertRows(chunks, rows);
        this.setHealthy(true);
        return true;
      } catch (e) {
        this.metrics.storeErrors.inc();
        this.setHealthy(false, e);
        this.updateGauges();
        if (this.stopping) return false;
        await this.backoff(attempt);
        if (this.stopping) return false;
      }
    }
  }

  /** Inserts, isolating rows the store refuses permanently. Transient errors propagate. */
  private async insertRows(lines: Lines, rows: number): Promise<void> {
    try {
      await this.timedInsert(lines, rows);
    } catch (e) {
      if (!(e instanceof SpanStoreRejectedError)) throw e;
      const whole = Buffer.isBuffer(lines) ? lines : Buffer.concat(lines);
      const all = splitLines(whole);
      if (all.length <= 1) {
        await this.deadLetter(whole, e.message);
        return;
      }
      const mid = all.length >> 1;
      const left = Buffer.concat(all.slice(0, mid));
      const right = Buffer.concat(all.slice(mid));
      await this.insertRows(left, mid);
      await this.insertRows(right, all.length - mid);
    }
  }

  private async timedInsert(lines: Lines, rows: number): Promise<void> {
    const started = performance.now();
    const insert = this.store.insertLines(lines, rows);
    let t: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      t = setTimeout(() => reject(new InsertTimeoutError(this.opts.timeoutMs)), this.opts.timeoutMs);
      t.unref();
    });
    try {
      await Promise.race([insert, timeout]);
    } catch (e) {
      // Keep one insert at a time: a timed-out insert is awaited before the retry.
      if (e instanceof InsertTimeoutError) await insert.catch(() => undefined);
      throw e;
    } finally {
      clearTimeout(t);
    }
    const ms = performance.now() - started;
    this.metrics.flushDuration.observe(ms / 1000);
    // At debug, each insert's span of time: the cluster benchmark measures the replicas' overlap from it.
    this.logger.debug({ rows, ms: Math.round(ms * 10) / 10 }, 'rows flushed');
    this.metrics.rowsFlushed.inc(rows);
    this.metrics.rowsPerFlush.observe(rows);
    this.opts.onStored?.();
  }

  private async deadLetter(line: Buffer, reason: string): Promise<void> {
    await fs.mkdir(this.opts.deadLetterDir, { recursive: true, mode: 0o700 });
    const file = path.join(this.opts.deadLetterDir, `${utcDay(Date.now())}.ndjson`);
    const entry = JSON.stringify({ failedAt: new Date().toISOString(), reason, row: line.toString('utf8').trimEnd() });
    await fs.appendFile(file, entry + '\n', { mode: 0o600 });
    this.metrics.deadLetterRows.inc();
    this.logger.error({ file, reason }, 'span store refused a row permanently; it was written to the dead-letter file');
  }

  /**
   * Damaged write-log records, skipped while their neighbours were stored:
   * their bytes go to the dead-letter folder as they were (a `.wal-damage`
   * file each, and a line in the day's file saying why), so nothing
   * acknowledged disappears without a trace.
   */
  private async deadLetterDamage(seg: SegmentInfo, damaged: readonly WalDamage[]): Promise<void> {
    await fs.mkdir(this.opts.deadLetterDir, { recursive: true, mode: 0o700 });
    const segment = path.basename(seg.file);
    let spans = 0;
    for (const d of damaged) {
      const file = path.join(this.opts.deadLetterDir, `${segment}-${d.offset}.wal-damage`);
      await fs.writeFile(file, d.bytes, { mode: 0o600 });
      const entry = JSON.stringify({
        failedAt: new Date().toISOString(),
        reason: d.reason,
        segment,
        offset: d.offset,
        bytes: d.bytes.length,
        spans: d.spans,
        file,
      });
      await fs.appendFile(path.join(this.opts.deadLetterDir, `${utcDay(Date.now())}.ndjson`), entry + '\n', { mode: 0o600 });
      spans += d.spans;
    }
    this.metrics.walDamagedRecords.inc(damaged.length);
    this.metrics.walUnreadableSpans.inc(spans);
    this.logger.error(
      { segment, records: damaged.length, spans, deadLetterDir: this.opts.deadLetterDir },
      `${spans} acknowledged spans could not be read from the write log (damaged records); their bytes are in the dead-letter folder`,
    );
  }

  /** Why the span store is not taking rows now (undefined while it is): what /readyz reports. */
  storeProblem(): string | undefined {
    if (this.storeHealthy) return undefined;
    const e = this.storeFailure;
    return `span store is not taking rows (retrying): ${e instanceof Error ? e.message : String(e)}`;
  }

  private setHealthy(ok: boolean, err?: unknown): void {
    this.storeFailure = ok ? undefined : err;
    if (ok === this.storeHealthy) return;
    this.storeHealthy = ok;
    this.metrics.storeUp.set(ok ? 1 : 0);
    // Logged once per state change, not per retry.
    if (ok) this.logger.info({ store: this.store.kind }, 'span store is accepting inserts again');
    else this.logger.error({ store: this.store.kind, err }, 'span store insert failed; rows stay in the write log and are retried with backoff');
  }

  private backoff(attempt: number): Promise<void> {
    const ms = backoffMs(attempt, { minMs: this.minBackoff, maxMs: this.maxBackoff });
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wakeBackoff = undefined;
        resolve();
      }, ms);
      t.unref();
      this.wakeBackoff = () => {
        clearTimeout(t);
        this.wakeBackoff = undefined;
        resolve();
      };
    });
  }
}

/**
 * A record as pieces of at most `maxBytes` (views, no copy), cut after a
 * newline; a single line longer than that is a piece of its own. One large
 * request's batch then never makes one large insert.
 */
export function* splitRecord(r: WalRecord, maxBytes: number): Generator<WalRecord> {
  const buf = r.payload;
  if (buf.length <= maxBytes) {
    yield r;
    return;
  }
  let start = 0;
  while (start < buf.length) {
    let end = buf.length;
    if (buf.length - start > maxBytes) {
      const nl = buf.lastIndexOf(10, start + maxBytes - 1);
      const cut = nl >= start ? nl : buf.indexOf(10, start + maxBytes);
      if (cut >= 0) end = cut + 1;
    }
    const piece = buf.subarray(start, end);
    yield { payload: piece, rows: countLines(piece) };
    start = end;
  }
}

/** The first `n` rows (0 < n < r.rows) of a record and the rest, as views, cut after the n-th newline. */
export function splitRows(r: WalRecord, n: number): [WalRecord, WalRecord] {
  const buf = r.payload;
  let at = -1;
  for (let i = 0; i < n; i++) {
    at = buf.indexOf(10, at + 1);
    if (at < 0) throw new Error(`a write log record of ${r.rows} rows holds fewer lines`);
  }
  return [
    { payload: buf.subarray(0, at + 1), rows: n },
    { payload: buf.subarray(at + 1), rows: r.rows - n },
  ];
}

/** Splits NDJSON into lines, each keeping its newline. */
function splitLines(buf: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  for (;;) {
    const nl = buf.indexOf(10, start);
    if (nl < 0) break;
    out.push(buf.subarray(start, nl + 1));
    start = nl + 1;
  }
  if (start < buf.length) out.push(buf.subarray(start));
  return out;
}
