import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import type { Logger } from 'pino';
import { backoffMs } from '@trace-ingest/shared/backoff';
import { QuotaExceededError } from '@trace-ingest/shared/errors';
import { utcMonth } from '@trace-ingest/shared/ids';
import type { ControlStore, UsageBatchCount } from '@trace-ingest/store/control-store-types';
import type { Metrics } from './metrics.js';

/**
 * Monthly span quota per org, counted per UTC calendar month. A batch that
 * starts under the quota is taken whole and counted after it is accepted, so
 * the overshoot is at most one batch per concurrent request. A batch is
 * counted by its fingerprint (`id`, see batchFingerprint): the same batch
 * added twice counts once.
 */
export interface QuotaCounter {
  check(orgId: string, monthlySpans: number, now: number): Promise<void>;
  add(orgId: string, batches: readonly UsageBatchCount[], now: number): Promise<void>;
  close(): Promise<void>;
}

/** Counts in the key store (SQLite or PostgreSQL): survives restarts. */
export class StoreQuotaCounter implements QuotaCounter {
  constructor(private readonly keys: ControlStore) {}

  async check(orgId: string, monthlySpans: number, now: number): Promise<void> {
    const used = await this.keys.getMonthUsage(orgId, utcMonth(now));
    if (used >= monthlySpans) throw new QuotaExceededError(monthlySpans);
  }

  async add(orgId: string, batches: readonly UsageBatchCount[], now: number): Promise<void> {
    await this.keys.addMonthUsageOnce(orgId, utcMonth(now), batches, Date.now());
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
  /** How long `add` waits for its batch to be counted before it returns anyway, the count owed (default 100 ms; 0: never waits). */
  countWaitMs?: number;
}

interface Owed {
  orgId: string;
  month: string;
  /** Any instant in the month, for the counter's `add`. */
  at: number;
  /** Spans by batch fingerprint. */
  batches: Map<string, number>;
  /** Their sum, kept as they come and go: the quota check reads it on every request. */
  spans: number;
}

/** As the pending file holds an org's month (older files: `spans` without batches). */
interface OwedFile {
  orgId: string;
  month: string;
  at: number;
  spans?: number;
  batches?: [string, number][];
}

/** Batches one add sends at most (one transaction). */
const MAX_BATCHES_PER_ADD = 2000;
/** Fingerprints kept in memory while owed; beyond it a batch is owed under a fingerprint of its own (no longer recognised if resent). */
const MAX_OWED_BATCHES = 200_000;

/**
 * Once a batch is in the write log it will be stored, so its answer is 202
 * whatever happens to the quota count, and the answer never waits long for
 * the count: `add` owes the batch at once (counted by `check` from then on);
 * the owed batches are added in the background, everything that came in
 * meanwhile in one transaction, one add at a time, retried with backoff
 * while the store fails (a lock, a timeout, an outage). `add` returns once
 * its batch is counted or after `countWaitMs`, whichever is first: when the
 * store answers in time, other replicas see the count before the client
 * sends its next batch (the shared quota stays exact), and when it does not,
 * the answer goes anyway. Owed counts
 * still open at shutdown go to `pendingFile` and are added on the next
 * start.
 *
 * Each batch is owed and added under its fingerprint: a batch already owed
 * here is not owed again, and the store adds a fingerprint once (across
 * replicas sharing it, for USAGE_BATCH_MEMORY_MS), so a resent batch is
 * charged once, and so is an add retried after the store committed it but
 * the answer was lost. What this cannot cover: a crash between the append
 * and the count (in memory only for that moment).
 */
export class ReconcilingQuota implements QuotaCounter {
  private owed: Owed[] = [];
  private owedBatches = 0;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<boolean> | undefined;
  private attempt = 0;
  /** Set once an add failed (or the previous run left counts): the next catch-up is logged and clears the pending file. */
  private behind = false;
  private closed = false;
  private readonly minBackoff: number;
  private readonly maxBackoff: number;
  private readonly countWaitMs: number;
  /** Callers of `add` waiting for a batch (org, month, fingerprint) to be counted. */
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly inner: QuotaCounter,
    private readonly opts: ReconcilingQuotaOptions,
  ) {
    this.minBackoff = opts.minBackoffMs ?? 100;
    this.maxBackoff = opts.maxBackoffMs ?? 30_000;
    this.countWaitMs = opts.countWaitMs ?? 100;
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
    let kept: OwedFile[];
    try {
      kept = JSON.parse(text) as OwedFile[];
    } catch (e) {
      this.opts.logger.error({ err: e, file: this.opts.pendingFile }, 'quota counts owed by the previous run are unreadable; left in place, not added');
      return;
    }
    for (const o of kept) {
      const batches = o.batches ?? [[`owed:${randomUUID()}`, o.spans ?? 0]];
      for (const [id, spans] of batches) this.owe(o.orgId, o.month, o.at, id, spans);
    }
    this.behind = true;
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

  /** Never throws; waits at most `countWaitMs` for the store: the batches are owed until the background add takes them. */
  async add(orgId: string, batches: readonly UsageBatchCount[], now: number): Promise<void> {
    const month = utcMonth(now);
    for (const b of batches) this.owe(orgId, month, now, b.id, b.spans);
    this.schedule(0);
    if (this.countWaitMs === 0 || this.closed) return;
    const mine: [string, () => void][] = [];
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(
        batches.map(
          (b) =>
            new Promise<void>((resolve) => {
              const key = waiterKey(orgId, month, b.id);
              let set = this.waiters.get(key);
              if (set === undefined) this.waiters.set(key, (set = new Set()));
              set.add(resolve);
              mine.push([key, resolve]);
            }),
        ),
      ),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, this.countWaitMs))),
    ]);
    clearTimeout(timer);
    for (const [key, resolve] of mine) {
      const set = this.waiters.get(key);
      set?.delete(resolve);
      if (set?.size === 0) this.waiters.delete(key);
    }
  }

  private counted(orgId: string, month: string, id: string): void {
    const key = waiterKey(orgId, month, id);
    const set = this.waiters.get(key);
    if (set === undefined) return;
    this.waiters.delete(key);
    for (const resolve of set) resolve();
  }

  private owe(orgId: string, month: string, at: number, id: string, spans: number): void {
    let o = this.owed.find((x) => x.orgId === orgId && x.month === month);
    if (o === undefined) {
      o = { orgId, month, at, batches: new Map(), spans: 0 };
      this.owed.push(o);
    }
    // A batch already owed (resent before its first count reached the store) is owed once.
    if (o.batches.has(id)) return;
    if (this.owedBatches >= MAX_OWED_BATCHES) id = `owed:${randomUUID()}`;
    o.batches.set(id, spans);
    o.spans += spans;
    this.owedBatches++;
    this.opts.metrics.quotaOwedSpans.set(this.owedTotal());
  }

  private owedTotal(): number {
    let n = 0;
    for (const o of this.owed) n += o.spans;
    return n;
  }

  private backoffMs(): number {
    return backoffMs(this.attempt++, { minMs: this.minBackoff, maxMs: this.maxBackoff });
  }

  /** Starts the background add after `ms`, unless one is running or waiting (it picks up what is owed by then). */
  private schedule(ms: number): void {
    if (this.timer !== undefined || this.running !== undefined || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.settle().then((ok) => {
        this.running = undefined;
        // Owed while this add ran (or still owed after a failure): the next add, at once or after a backoff.
        if (this.owed.length > 0) this.schedule(ok ? 0 : this.backoffMs());
        return ok;
      });
    }, ms);
    this.timer.unref();
  }

  /** Adds what is owed, oldest org-month first, until done or the store fails again. */
  private async settle(): Promise<boolean> {
    while (this.owed.length > 0) {
      const o = this.owed[0]!;
      const sent: UsageBatchCount[] = [];
      for (const [id, spans] of o.batches) {
        if (sent.length === MAX_BATCHES_PER_ADD) break;
        sent.push({ id, spans });
      }
      try {
        await this.inner.add(o.orgId, sent, o.at);
      } catch (e) {
        if (!this.behind) {
          this.behind = true;
          this.opts.logger.error(
            { err: e, orgId: o.orgId, owedSpans: this.owedTotal() },
            'could not add accepted spans to the quota usage; they are counted here and retried until the store takes them',
          );
        } else this.opts.logger.warn({ err: e, owedSpans: this.owedTotal() }, 'quota usage still cannot be updated; retrying');
        return false;
      }
      // Batches owed to the same org and month while the add ran stay owed.
      for (const b of sent) {
        o.batches.delete(b.id);
        o.spans -= b.spans;
        this.counted(o.orgId, o.month, b.id);
      }
      this.owedBatches -= sent.length;
      if (o.batches.size === 0) this.owed.splice(this.owed.indexOf(o), 1);
      this.opts.metrics.quotaOwedSpans.set(this.owedTotal());
    }
    this.attempt = 0;
    if (this.behind) {
      this.behind = false;
      await fs.rm(this.opts.pendingFile, { force: true }).catch(() => undefined);
      this.opts.logger.info('quota usage is up to date again');
    }
    return true;
  }

  /** One last attempt; what is still owed is written to the pending file. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const set of this.waiters.values()) for (const resolve of set) resolve();
    this.waiters.clear();
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
    if (this.owed.length > 0 && !(await this.settle())) {
      const tmp = `${this.opts.pendingFile}.tmp`;
      const file: OwedFile[] = this.owed.map((o) => ({ orgId: o.orgId, month: o.month, at: o.at, batches: [...o.batches] }));
      await fs.writeFile(tmp, JSON.stringify(file));
      await fs.rename(tmp, this.opts.pendingFile);
      this.opts.logger.error(
        { owedSpans: this.owedTotal(), file: this.opts.pendingFile },
        'quota usage could not be updated before exit; the next start adds it',
      );
    }
    await this.inner.close();
  }
}

function waiterKey(orgId: string, month: string, id: string): string {
  return `${orgId}\u0000${month}\u0000${id}`;
}
