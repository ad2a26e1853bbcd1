import { ALREADY_EXISTS_CODES, clickHouseErrorCode, ILLEGAL_COLUMN } from './clickhouse-errors.js';
import { bindParams } from './clickhouse-sql.js';
import { serverRules } from './clickhouse-versions.js';
import { loadMigrationFiles, type MigrationFile } from './migration-files.js';

// The same relative path from src/ and from dist/.
const MIGRATIONS_DIR = new URL('../../../migrations/clickhouse/', import.meta.url);

export interface ClickHouseLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export type ClickHouseMigration = MigrationFile;

/** The versioned migrations of `migrations/clickhouse/`, in order. */
export async function loadClickHouseMigrations(dir: URL = MIGRATIONS_DIR): Promise<ClickHouseMigration[]> {
  return loadMigrationFiles(dir);
}

export const MIGRATIONS_TABLE_DDL =
  'CREATE TABLE IF NOT EXISTS schema_migrations (version String, checksum String, applied_at DateTime) ENGINE = ReplacingMergeTree() ORDER BY version';

/**
 * What the migration runner needs from a connection: an @clickhouse/client
 * client, or anything else that speaks SQL to ClickHouse (chdb in the tests).
 */
export interface ClickHouseExecutor {
  command(params: { query: string; clickhouse_settings?: Record<string, 0 | 1> }): Promise<unknown>;
  query(params: { query: string; format: 'JSONEachRow' }): Promise<{ json<T>(): Promise<T[]> }>;
}

export async function rows<T>(client: ClickHouseExecutor, query: string): Promise<T[]> {
  const rs = await client.query({ query, format: 'JSONEachRow' });
  return rs.json<T>();
}

/**
 * Applies the migrations not yet recorded in `schema_migrations`. `client`
 * must be connected to `database` (checked: a wrong client must not migrate
 * another database). Every statement is idempotent, so a second run, or
 * several replicas at once, all succeed; a replica that loses a CREATE race
 * treats "already exists" as done. Returns the versions this call applied.
 */
export async function applyClickHouseMigrations(client: ClickHouseExecutor, database: string, logger?: ClickHouseLogger): Promise<string[]> {
  const [info] = await rows<{ db: string; v: string }>(client, 'SELECT currentDatabase() AS db, version() AS v');
  if (info === undefined || info.db !== database)
    throw new Error(`ClickHouse client is connected to database ${JSON.stringify(info?.db)}, not ${JSON.stringify(database)}`);
  const rules = serverRules(info.v);
  const run = async (stmt: string) => {
    try {
      await client.command({ query: stmt, clickhouse_settings: rules.ddlSettings });
    } catch (e) {
      const code = clickHouseErrorCode(e, rules.typedErrors);
      if (code === undefined || !(ALREADY_EXISTS_CODES.has(code) || (code === ILLEGAL_COLUMN && /already exists/.test(String(e))))) throw e;
    }
  };
  await run(MIGRATIONS_TABLE_DDL);
  // Databases migrated before checksums were recorded lack the column.
  const [hasChecksum] = await rows<{ n: number | string }>(
    client,
    "SELECT count() AS n FROM system.columns WHERE database = currentDatabase() AND table = 'schema_migrations' AND name = 'checksum'",
  );
  if (Number(hasChecksum?.n) === 0) await run('ALTER TABLE schema_migrations ADD COLUMN checksum String');
  const recorded = new Map(
    (await rows<{ version: string; checksum: string }>(client, 'SELECT version, any(checksum) AS checksum FROM schema_migrations GROUP BY version')).map(
      (r) => [r.version, r.checksum],
    ),
  );
  const applied: string[] = [];
  for (const m of await loadClickHouseMigrations()) {
    const seen = recorded.get(m.version);
    if (seen !== undefined) {
      if (seen !== m.checksum)
        logger?.warn(
          { version: m.version, recorded: seen, file: m.checksum },
          'ClickHouse migration file changed after it was applied; it is not applied again',
        );
      continue;
    }
    for (const stmt of m.statements) await run(stmt);
    await client.command({ query: bindParams('INSERT INTO schema_migrations (version, checksum, applied_at) VALUES (?, ?, now())', [m.version, m.checksum]) });
    applied.push(m.version);
  }
  if (applied.length > 0) logger?.info({ database, applied, server: info.v }, 'ClickHouse migrations applied');
  return applied;
}
