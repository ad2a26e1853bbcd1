import { describe, expect, it } from 'vitest';
import { DAILY_ROLLUPS, MEASURES, TRACE_COLUMNS } from '@trace-ingest/shared/rollups';
import { DERIVED_TABLES, derivedColumns, derivedSchemaStatements, deriveSql } from './clickhouse-derive.js';
import { loadClickHouseMigrations } from './clickhouse-migrations.js';

describe('the derived tables of ClickHouse', () => {
  it('are created by migration 0008 exactly as rendered from rollups.ts', async () => {
    const m = (await loadClickHouseMigrations()).find((x) => x.version === '0008_derived_tables');
    expect(m?.statements).toEqual(derivedSchemaStatements());
  });

  it('have the columns of rollups.ts, and every derivation inserts each of them', () => {
    for (const r of DAILY_ROLLUPS) expect(derivedColumns(r.table).map(([n]) => n)).toEqual([...r.keys, ...MEASURES.map((m) => m.name)]);
    expect(derivedColumns('traces').map(([n]) => n)).toEqual(TRACE_COLUMNS);
    const sql = deriveSql("'o'", ['2026-10-05'], 7);
    expect(sql).toHaveLength(DERIVED_TABLES.length);
    for (const [i, t] of DERIVED_TABLES.entries()) {
      expect(sql[i]).toContain(
        `INSERT INTO ${t}_d (derivation, ${derivedColumns(t)
          .map(([n]) => n)
          .join(', ')}) SELECT toUInt64(7) AS derivation, `,
      );
      // Read once per span: no weights.
      expect(sql[i]).not.toContain('rollup_weight');
    }
  });
});
