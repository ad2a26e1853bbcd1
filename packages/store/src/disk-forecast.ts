import { DAY_MS } from '@trace-ingest/shared/dates';
import type { SpanStore } from './span-store.js';

/** How full the span store's disk gets, at the rate spans came in lately. */
export interface DiskForecast {
  usedBytes: number;
  /** Free bytes on the store's disk; undefined where the store cannot tell (ClickHouse 18.16). */
  freeBytes: number | undefined;
  spans: number;
  /** Bytes on disk per stored span (0 while the store is empty). */
  bytesPerSpan: number;
  /** Spans received in the last hour and the last day (by received_at). */
  spansLastHour: number;
  spansLastDay: number;
  /** Days until the disk is full at the faster of the two rates; undefined when nothing comes in or the free space is unknown. */
  daysUntilFull: number | undefined;
}

/** Under this many days of room, `doctor` warns. */
export const FORECAST_WARN_DAYS = 14;

/**
 * Reads the store's size and its recent ingest rate from the rows
 * themselves (received_at), so the forecast survives restarts and needs no
 * server: `doctor` and `/metrics` both call it.
 */
export async function diskForecast(store: SpanStore, now = Date.now()): Promise<DiskForecast> {
  const { usedBytes, freeBytes } = await store.disk();
  const sql =
    store.kind === 'clickhouse'
      ? 'SELECT count() AS n, countIf(received_at >= ?) AS h, countIf(received_at >= ?) AS d FROM spans'
      : 'SELECT count(*) AS n, count(*) FILTER (WHERE received_at >= ?) AS h, count(*) FILTER (WHERE received_at >= ?) AS d FROM spans';
  const [r] = await store.query(sql, [now - 3_600_000, now - DAY_MS]);
  const spans = Number(r?.n ?? 0);
  const spansLastHour = Number(r?.h ?? 0);
  const spansLastDay = Number(r?.d ?? 0);
  const bytesPerSpan = spans === 0 ? 0 : usedBytes / spans;
  const perDay = Math.max(spansLastDay, spansLastHour * 24) * bytesPerSpan;
  const daysUntilFull = freeBytes === undefined || perDay <= 0 ? undefined : freeBytes / perDay;
  return { usedBytes, freeBytes, spans, bytesPerSpan, spansLastHour, spansLastDay, daysUntilFull };
}
