import type { Logger } from 'pino';
import { retentionCuts, type Retention } from '@trace-ingest/shared/lifecycle';
import type { ControlStore } from '@trace-ingest/store/control-store-types';
import type { SpanStore } from '@trace-ingest/store/span-store';
import type { Lease } from '@trace-ingest/store/clickhouse-derive';
import type { Metrics } from './metrics.js';

export interface RetentionOptions {
  /** The install's defaults, for orgs without settings of their own. */
  defaults: Retention;
  intervalMs: number;
  /** Delay of the first pass after start. */
  firstDelayMs?: number;
  /** Rows one store call touches before the pass moves on (and comes back): inserts are not held up for long. */
  batchRows?: number;
  now?: () => number;
  /** Held by one replica of the cluster at a time: the others skip their passes. */
  lease?: Lease | undefined;
}

/**
 * Applies each org's retention to the span store: rows past their days are
 * deleted, texts past their text days emptied. One pass at a time, on a
 * timer that does not hold the process open; a failed pass is logged and the
 * next one tries again.
 */
export class RetentionJob {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private closed = false;
  private known = new Map<string, Retention>();
  private refresher: NodeJS.Timeout | undefined;

  constructor(
    private readonly control: ControlStore,
    private readonly spans: SpanStore,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
    private readonly opts: RetentionOptions,
  ) {}

  start(): void {
    this.schedule(this.opts.firstDelayMs ?? 60_000);
    void this.refreshKnown();
    // A changed retention reaches the rows written next within a minute.
    this.refresher = setInterval(() => void this.refreshKnown(), 60_000);
    this.refresher.unref();
  }

  /** The org's retention as last read (with the install's defaults filled in); undefined before the first read. */
  retentionOf(orgId: string): Retention | undefined {
    return this.known.get(orgId);
  }

  async refreshKnown(): Promise<void> {
    try {
      const orgs = await this.control.listOrgs();
      this.known = new Map(orgs.map((o) => [o.id, this.effective(o)]));
    } catch (e) {
      this.logger.debug({ err: e }, 'org retention not read; the last known stays');
    }
  }

  private effective(org: { retentionDays: number | null; textDays: number | null }): Retention {
    return { days: org.retentionDays ?? this.opts.defaults.days, textDays: org.textDays ?? this.opts.defaults.textDays };
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      void this.runOnce()
        .catch((e: unknown) => this.logger.warn({ err: e }, 'retention pass failed; the next one tries again'))
        .finally(() => this.schedule(this.opts.intervalMs));
    }, ms);
    this.timer.unref();
  }

  /** One pass over every org; a pass already running is joined. */
  runOnce(): Promise<void> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async pass(): Promise<void> {
    if (this.opts.lease !== undefined && !(await this.opts.lease.hold())) return;
    const now = (this.opts.now ?? Date.now)();
    const batch = this.opts.batchRows ?? 200_000;
    for (const org of await this.control.listOrgs()) {
      const r = this.effective(org);
      const cut = { orgId: org.id, ...retentionCuts(now, r) };
      if (cut.rowsBefore === undefined && cut.textsBefore === undefined) continue;
      let deleted = 0;
      let emptied = 0;
      for (;;) {
        if (this.closed) return;
        const res = await this.spans.expire(cut, batch);
        deleted += res.deletedRows;
        emptied += res.emptiedRows;
        if (res.done) break;
      }
      this.metrics.retentionDeleted.inc(deleted);
      this.metrics.retentionEmptied.inc(emptied);
      if (deleted + emptied > 0) this.logger.info({ org: org.name, deletedRows: deleted, emptiedTexts: emptied }, 'retention applied');
    }
  }

  /** Idempotent: stops the timer and waits for a running pass to stop at its next batch. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.refresher !== undefined) clearInterval(this.refresher);
    await this.running?.catch(() => undefined);
    await this.opts.lease?.close();
  }
}
