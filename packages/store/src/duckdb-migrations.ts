import type { DuckDBConnection } from '@duckdb/node-api';
import { SPAN_COLUMNS, type ColumnKind } from '@trace-ingest/shared/rows';
import { loadMigrationFiles, type MigrationFile } from './migration-files.js';

// The same relative path from src/ and from dist/.
const MIGRATIONS_DIR = new URL('../../../migrations/duckdb/', import.meta.url);

/** How each column kind of SPAN_COLUMNS is typed in DuckDB (as `duckdb_columns()` names the type). */
export const DUCKDB_TYPES: Record<ColumnKind, string> = {
  string: 'VARCHAR',
  int: 'BIGINT',
  nullable_int: 'BIGINT',
  nullable_float: 'DOUBLE',
  date: 'DATE',
  decimal: 'DECIMAL(38,18)',
  bool: 'BOOLEAN',
  string_array: 'VARCHAR[]',
  int_array: 'BIGINT[]',
};

/** The `columns` argument of read_json for these columns (the stores' and exports' bulk loads). */
export function readJsonColumns(columns: readonly (readonly [string, ColumnKind])[] = SPAN_COLUMNS): string {
  return `{${columns.map(([n, k]) => `'${n}': '${DUCKDB_TYPES[k]}'`).join(', ')}}`;
}

/** What a line without a column's key loads as: the empty value of its kind (rows.ts's EMPTY_VALUES, as SQL; NULL where the column takes NULL). */
const EMPTY: Partial<Record<ColumnKind, string>> = {
  string: "''",
  int: '0',
  decimal: '0',
  bool: 'false',
  string_array: '[]',
  int_array: '[]',
};

/**
 * The select list of a bulk load of these columns from read_json. A line
 * written before a column existed (a write log replayed after an upgrade)
 * lacks its key, which read_json gives as NULL: it loads as the empty value.
 */
export function loadColumnList(columns: readonly (readonly [string, ColumnKind])[] = SPAN_COLUMNS): string {
  return columns.map(([n, k]) => (EMPTY[k] === undefined ? `"${n}"` : `coalesce("${n}", ${EMPTY[k]}) AS "${n}"`)).join(', ');
}

export interface DuckDbMigrationLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/** The versioned migrations of `migrations/duckdb/`, in order. */
export async function loadDuckDbMigrations(dir: URL = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  return loadMigrationFiles(dir);
}

const MIGRATIONS_TABLE_DDL =
  'CREATE TABLE IF NOT EXISTS schema_migrations (version VARCHAR PRIMARY KEY, checksum VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)';

/**
 * Applies the migrations not yet recorded in `schema_migrations`, each in a
 * transaction of its own with its record, so a crash leaves a file either
 * before or after a migration, never halfway. A file made before versions
 * were recorded takes `0001` as a no-op (its statements are IF NOT EXISTS).
 * Returns the versions this call applied.
 */
export async function applyDuckDbMigrations(conn: DuckDBConnection, logger?: DuckDbMigrationLogger, dir?: URL): Promise<string[]> {
  await conn.run(MIGRATIONS_TABLE_DDL);
  const recorded = new Map(
    (await conn.runAndReadAll('SELECT version, checksum FROM schema_migrations')).getRowObjectsJson().map((r) => [String(r.version), String(r.checksum)]),
  );
  const applied: string[] = [];
  for (const m of await loadDuckDbMigrations(dir)) {
    const seen = recorded.get(m.version);
    if (seen !== undefined) {
      if (seen !== m.checksum)
        logger?.warn({ version: m.version, recorded: seen, file: m.checksum }, 'DuckDB migration file changed after it was applied; it is not applied again');
      continue;
    }
    await conn.run('BEGIN TRANSACTION');
    try {
      for (const stmt of m.statements) await conn.run(stmt);
      await conn.run('INSERT INTO schema_migrations VALUES ($1, $2, now())', [m.version, m.checksum]);
      await conn.run('COMMIT');
    } catch (e) {
      await conn.run('ROLLBACK').catch(() => undefined);
      throw new Error(`DuckDB migration ${m.version} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    applied.push(m.version);
  }
  if (applied.length > 0) logger?.info({ applied }, 'DuckDB migrations applied');
  return applied;
}

/** Columns of SPAN_COLUMNS that the `spans` table lacks or types otherwise ([] when it matches). */
export async function spansSchemaDrift(conn: DuckDBConnection): Promise<string[]> {
  const rows = (
    await conn.runAndReadAll("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'spans' AND database_name = current_database()")
  ).getRowObjectsJson();
  const have = new Map(rows.map((r) => [String(r.column_name), String(r.data_type)]));
  const drift: string[] = [];
  for (const [name, kind] of SPAN_COLUMNS) {
    const type = have.get(name);
    if (type === undefined) drift.push(`${name} missing`);
    else if (type !== DUCKDB_TYPES[kind]) drift.push(`${name} is ${type}, not ${DUCKDB_TYPES[kind]}`);
  }
  return drift;
}
