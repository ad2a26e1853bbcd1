import { describe, expect, it } from 'vitest';
import { CLICKHOUSE_ROLLUP, DUCKDB_ROLLUP } from './rollups.js';
import { isUnpriced } from './unpriced.js';

describe('the unpriced rule', () => {
  it('is a span with a model and no price, in TypeScript', () => {
    expect([isUnpriced(false, 'gpt-4o'), isUnpriced(true, 'gpt-4o'), isUnpriced(false, ''), isUnpriced(true, '')]).toEqual([true, false, false, false]);
  });

  it('is the same condition in each store dialect, and the flag the rollups sum', () => {
    expect(DUCKDB_ROLLUP.unpriced).toBe("NOT priced AND model_id <> ''");
    expect(DUCKDB_ROLLUP.unpricedFlag).toBe("CASE WHEN NOT priced AND model_id <> '' THEN 1 ELSE 0 END");
    expect(CLICKHOUSE_ROLLUP.unpriced).toBe("priced = 0 AND model_id != ''");
    expect(CLICKHOUSE_ROLLUP.unpricedFlag).toBe("toInt64(if(priced = 0 AND model_id != '', 1, 0))");
  });
});
