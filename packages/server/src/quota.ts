import fs from 'node:fs/promises';
import type { Logger } from 'pino';
import { backoffMs } from '@trace-ingest/shared/backoff';
import { QuotaExceededError } from '@trace-ingest/shared/errors';
import { utcMonth } from '@trace-ingest/shared/ids';
import type { ControlStore } from '@trace-ingest/store/control-store-types';
import type { Metrics } from './metrics.js';

/**
 * Monthly span quota per org, counted per UTC calendar month. A batch that
 * starts under the quota is taken whole and counted after it is accepted, so
 * the overshoot is at most one batch per concurrent request.
 */
export interface QuotaCounter {
  check(orgId: string, monthlySpans: number, now: number): Promise<void>;
  add(orgId: string, spans: number, now: number): Promise<void>;
  close(): Promise<void>;
}

/** Counts in the key store (SQLite or PostgreSQL): survives restarts. */
export class StoreQuotaCounter implements QuotaCounter {
  constructor(private readonly keys: ControlStore) {}

  async check(orgId: string, monthlySpans: number, now: number): Promise<void> {
    const used = await this.keys.getMonthUsage(orgId, utcMonth(now));
    if (used >= monthlySpans) throw new QuotaExceededError(monthlySpans);
  }

  async add(orgId: string, spans: number, now: number): Promise<void> {
    await this.keys.addMonthUsage(orgId, utcMonth(now), spans);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

export interface ReconcilingQuotaOptions {
  /** Where counts still owed to the store at shutdown are kept for the next start. */
  pendingFile: string;
  logger: Logger;
  metrics: Metrics;
  /** Backoff bounds between attempts while the store fails; jitter is applied on top. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

interface Owed {
  orgId: string;
  month: string;
  /** Any instant in the month, for the counter's `add`. */
  at: number;
  spans: number;
}

/**
 * Once a batch is in the write log it will be stored, so its answer is 202
 * whatever happens to the quota count. `add` therefore never throws: spans
 * the store could not take are owed, retried with backoff (one attempt at a
 * time, in the order they came), and counted by `check` meanwhile, so the
 * quota still holds during the outage. While anything is owed, new counts
 * queue behind it instead of each request paying for the failing store.
 * Owed counts still open at shutdown go to `pendingFile` and are added on the
 * next start.
 *
 * A count is added by exactly one successful `add` of the counter below;
 * an `add` that failed added nothing (SQLite busy, PostgreSQL or Redis
 * unreachable). What this cannot cover: a crash between the append and the
 * count (in memory only for that moment), and a store that committed an add
 * and then lost the connection before answering (retried, so counted twice).
 */
export class ReconcilingQuota implements QuotaCounter {
  private owed: Owed[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<boolean> | undefined;
  private attempt = 0;
  private closed = false;
  private readonly minBackoff: number;
  private readonly maxBackoff: number;

  constructor(
    private readonly inner: QuotaCounter,
    private readonly opts: ReconcilingQuotaOptions,
  ) {
    this.minBackoff = opts.minBackoffMs ?? 100;
    this.maxBackoff = opts.maxBackoffMs ?? 30_000;
  }

  /** Takes over what the previous run still owed the store. */
  async start(): Promise<void> {
    let text: string;
    try {
      text = await fs.readFile(this.opts.pendingFile, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    let kept: Owed[];
    try {
      kept = JSON.parse(text) as Owed[];
    } catch (e) {
      this.opts.logger.error({ err: e, file: this.opts.pendingFile }, 'quota counts owed by the previous run are unreadable; left in place, not added');
      return;
    }
    for (const o of kept) this.owe(o.orgId, o.month, o.at, o.spans);
    this.opts.logger.info({ spans: this.owedTotal() }, 'quota counts owed by the previous run are being added');
    this.schedule(0);
  }

  /** Spans of the org's month that are accepted but not yet in the store. */
  owedSpans(orgId: string, month: string): number {
    let n = 0;
    for (const o of this.owed) if (o.orgId === orgId && o.month === month) n += o.spans;
    return n;
  }

  async check(orgId: string, monthlySpans: number, now: number): Promise<void> {
    const owed = this.owedSpans(orgId, utcMonth(now));
    if (owed === 0) return this.inner.check(orgId, monthlySpans, now);
    if (owed >= monthlySpans) throw new QuotaExceededError(monthlySpans);
    try {
      await this.inner.check(orgId, monthlySpans - owed, now);
    } catch (e) {
      // The message names the plan's quota, not the part of it left after the owed spans.
      if (e instanceof QuotaExceededError) throw new QuotaExceededError(monthlySpans);
      throw e;
    }
  }

  /** Never throws; resolves once the spans are counted or owed. */
  async add(orgId: string, spans: number, now: number): Promise<void> {
    if (this.owed.length > 0 || this.closed) {
      this.owe(orgId, utcMonth(now), now, spans);
      return;
    }
    try {
      await this.inner.add(orgId, spans, now);
    } catch (e) {
      this.opts.logger.error(
        { err: e, orgId },
        'could not add accepted spans to the quota usage; they are counted here and retried until the store takes them',
      );
      this.owe(orgId, utcMonth(now), now, spans);
      this.schedule(this.backoffMs());
    }
  }

  private owe(orgId: string, month: string, at: number, spans: number): void {
    const same = this.owed.find((o) => o.orgId === orgId && o.month === month);
    if (same !== undefined) same.spans += spans;
    else this.owed.push({ orgId, month, at, spans });
    this.opts.metrics.quotaOwedSpans.set(this.owedTotal());
  }

  private owedTotal(): number {
    return this.owed.reduce((n, o) => n + o.spans, 0);
  }

  private backoffMs(): number {
    return backoffMs(this.attempt++, { minMs: this.minBackoff, maxMs: this.maxBackoff });
  }

  private schedule(ms: number): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.settle().finally(() => (this.running = undefined));
    }, ms);
    this.timer.unref();
  }

  /** Adds what is owed, oldest first, until done or the store fails again. */
  private async settle(): Promise<boolean> {
    while (this.owed.length > 0) {
      const o = this.owed[0]!;
      const spans = o.spans;
      try {
        await this.inner.add(o.orgId, spans, o.at);
      } catch (e) {
        this.opts.logger.warn({ err: e, owedSpans: this.owedTotal() }, 'quota usage still cannot be updated; retrying');
        this.schedule(this.backoffMs());
        return false;
      }
      // Spans owed to the same org and month while the add ran stay owed.
      o.spans -= spans;
      if (o.spans === 0) this.owed.shift();
      this.opts.metrics.quotaOwedSpans.set(this.owedTotal());
    }
    this.attempt = 0;
    await fs.rm(this.opts.pendingFile, { force: true });
    this.opts.logger.info('quota usage is up to date again');
    return true;
  }

  /** One last attempt; what is still owed is written to the pending file. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
    if (this.owed.length > 0 && !(await this.settle())) {
      clearTimeout(this.timer);
      this.timer = undefined;
      const tmp = `${this.opts.pendingFile}.tmp`;
      await fs.writeFile(tmp, JSON.stringify(this.owed));
      await fs.rename(tmp, this.opts.pendingFile);
      this.opts.logger.error(
        { owedSpans: this.owedTotal(), file: this.opts.pendingFile },
        'quota usage could not be updated before exit; the next start adds it',
      );
    }
    await this.inner.close();
  }
}
