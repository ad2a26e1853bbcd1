import { describe, expect, it } from 'vitest';
import { CLICKHOUSE_ROLLUP, DUCKDB_ROLLUP } from '@trace-ingest/shared/rollups';
import { decimalText, storedColumns, storedToRow } from './row-codec.js';

describe('row codec', () => {
  it('writes a store decimal in formatDecimal form', () => {
    expect(['1.2500', '0.000', '-0.0', '007.10', '-00.5', '12', '1e-7'].map(decimalText)).toEqual(['1.25', '0', '0', '7.1', '-0.5', '12', '0.0000001']);
  });

  it('reads decimals and dates as text in the store dialect', () => {
    expect(storedColumns(DUCKDB_ROLLUP)).toContain('CAST(total_cost AS VARCHAR) AS total_cost');
    expect(storedColumns(CLICKHOUSE_ROLLUP)).toContain('toString(start_date) AS start_date');
    expect(storedColumns(CLICKHOUSE_ROLLUP)).toMatch(/^org_id, key_prefix, received_at, /);
  });

  it('decodes driver values to the canonical row, only the columns asked for', () => {
    const row = storedToRow({ span_id: 's1', start_time: '17', priced: 1, total_cost: '0.50', start_date: '2026-11-26T00:00:00', ttft_ms: null }, [
      'span_id',
      'start_time',
      'priced',
      'total_cost',
      'start_date',
      'ttft_ms',
    ]);
    expect(row).toEqual({ span_id: 's1', start_time: 17, priced: true, total_cost: '0.5', start_date: '2026-11-26', ttft_ms: null });
  });
});
