import { TEXT_COLUMNS } from '@trace-ingest/shared/lifecycle';
import { rows, type ClickHouseExecutor } from './clickhouse-migrations.js';
import { serverRules } from './clickhouse-versions.js';

/** A day past any start_date, for rows kept forever (Date ends in 2149). */
const FOREVER = "toDate('2149-01-01')";

/**
 * The retention of migration 0004 as TTL expressions: a row goes the day
 * after its `retention_days` have passed (as the retention pass cuts, by
 * whole UTC days), its texts the day after its `text_days`. Merges apply
 * them, so expiry costs no mutation where the server has TTL.
 */
export function retentionTtlStatements(): string[] {
  const after = (col: string) => `if(${col} = 0, ${FOREVER}, start_date + toIntervalDay(${col} + 1))`;
  return [
    `ALTER TABLE spans MODIFY TTL ${after('retention_days')}`,
    ...TEXT_COLUMNS.map((c) => `ALTER TABLE spans MODIFY COLUMN ${c} String TTL ${after('text_days')}`),
  ];
}

/** Applies the TTLs once, on a server that has TTL (19.6 and later); false when there is nothing to do. */
export async function applyRetentionTtl(client: ClickHouseExecutor, serverVersion: string): Promise<boolean> {
  if (!serverRules(serverVersion).ttl) return false;
  const [t] = await rows<{ q: string }>(client, "SELECT create_table_query AS q FROM system.tables WHERE database = currentDatabase() AND name = 'spans'");
  if (t === undefined || /\bTTL\b/.test(t.q)) return false;
  for (const query of retentionTtlStatements()) await client.command({ query });
  return true;
}
