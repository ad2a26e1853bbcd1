import type { Logger } from 'pino';
import { diskForecast } from '@trace-ingest/store/disk-forecast';
import type { SpanStore } from '@trace-ingest/store/span-store';
import type { Metrics } from './metrics.js';

/**
 * Keeps the disk gauges of /metrics current (bytes per store, bytes per
 * span, the ingest rate and the days until the disk is full): read on a
 * timer, not per scrape, since the rate is counted in the span store.
 */
export class DiskReporter {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly spans: SpanStore,
    private readonly writeLogBytes: () => number,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
    private readonly intervalMs = 60_000,
  ) {}

  start(): void {
    void this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.intervalMs);
    this.timer.unref();
  }

  refresh(): Promise<void> {
    this.running ??= this.read().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async read(): Promise<void> {
    try {
      const f = await diskForecast(this.spans);
      const m = this.metrics;
      m.storeBytes.set({ store: 'spans' }, f.usedBytes);
      m.storeBytes.set({ store: 'write_log' }, this.writeLogBytes());
      m.bytesPerSpan.set(f.bytesPerSpan);
      m.ingestRate.set({ window: '1h' }, f.spansLastHour / 3600);
      m.ingestRate.set({ window: '1d' }, f.spansLastDay / 86_400);
      if (f.freeBytes !== undefined) m.diskFree.set(f.freeBytes);
      if (f.daysUntilFull === undefined) m.daysUntilFull.reset();
      else m.daysUntilFull.set(f.daysUntilFull);
    } catch (e) {
      this.logger.debug({ err: e }, 'disk forecast not read');
    }
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
