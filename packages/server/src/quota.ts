import { QuotaExceededError } from '@trace-ingest/shared/errors';
import { utcMonth } from '@trace-ingest/shared/ids';
import type { KeyStore } from '@trace-ingest/store/key-store';

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
  constructor(private readonly keys: KeyStore) {}

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
