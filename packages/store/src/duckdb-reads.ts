/**
 * Reads on a connection of their own: ad-hoc SQL from ops, refused unless it
 * only reads, and streamed reads that hand rows out a chunk at a time.
 */
import { JsonDuckDBValueConverter, StatementType, type DuckDBValue } from '@duckdb/node-api';
import type { DuckDbFile } from './duckdb-file.js';
import { ReadOnlyQueryError, type QueryRow } from './span-store.js';

/**
 * An ad-hoc query (`trace-ingest sql`), on a connection of its own inside a
 * READ ONLY transaction, on an instance whose files, network and extensions
 * are off (lockDown): DuckDB itself refuses a write (EXPLAIN ANALYZE DELETE
 * included), a host file, a URL or an extension, whatever the statement.
 * One SELECT or EXPLAIN, for a clear answer to anything else.
 */
export async function readOnlyQuery(file: DuckDbFile, sql: string, params: readonly unknown[], maxRows?: number): Promise<QueryRow[]> {
  // Never an answer from a file removed under the server (its rows are gone at stop); a replaced one is reopened first.
  await file.checkFile();
  const conn = await file.connect();
  try {
    const extracted = await conn.extractStatements(sql);
    if (extracted.count !== 1) throw new ReadOnlyQueryError(`give exactly one statement (got ${extracted.count})`);
    await conn.run('BEGIN TRANSACTION READ ONLY');
    const prepared = await extracted.prepare(0).catch(refusal);
    if (prepared.statementType !== StatementType.SELECT && prepared.statementType !== StatementType.EXPLAIN) {
      throw new ReadOnlyQueryError('only SELECT (or EXPLAIN) queries are allowed: the span store is read-only here');
    }
    if (params.length > 0) prepared.bind(params as DuckDBValue[]);
    if (maxRows === undefined) return (await prepared.runAndReadAll().catch(refusal)).getRowObjectsJson() as QueryRow[];
    // Read chunk by chunk and stop at maxRows: the rest is never materialized.
    const out: QueryRow[] = [];
    for await (const rows of (await prepared.stream().catch(refusal)).yieldRowObjectJson()) {
      for (const r of rows as QueryRow[]) {
        if (out.length >= maxRows) return out;
        out.push(r);
      }
    }
    return out;
  } finally {
    // The query's own transaction (or what it left) ends with it; the connection too, with any USE or PRAGMA of its own.
    await conn.run('ROLLBACK').catch(() => undefined);
    conn.closeSync();
  }
}

/** The rows of a read as DuckDB produces them (see SpanStore.queryStream). */
export async function* streamRows(file: DuckDbFile, sql: string, params: readonly unknown[]): AsyncIterable<QueryRow> {
  await file.checkFile();
  // A connection of its own: another statement on a connection ends the stream running on it,
  // while writes through the writer (reprice replaces rows as it reads) leave this snapshot alone.
  const conn = await file.connect();
  try {
    const result = await conn.stream(sql, params as DuckDBValue[]);
    const names = result.deduplicatedColumnNames();
    // One data chunk at a time, each reset once its rows are converted: a chunk's
    // native memory is otherwise freed only when a collection finds its wrapper, and wrappers that
    // live through a chunk's rows reach the old generation and hold its memory longer.
    for (;;) {
      const chunk = await result.fetchChunk();
      if (chunk === null || chunk.rowCount === 0) break;
      const columns = chunk.convertColumns(JsonDuckDBValueConverter);
      const count = chunk.rowCount;
      chunk.reset();
      for (let i = 0; i < count; i++) {
        const row: QueryRow = {};
        names.forEach((n, c) => (row[n] = columns[c]?.[i] ?? null));
        yield row;
      }
    }
  } finally {
    conn.closeSync();
  }
}

/** DuckDB's refusals of a write (a READ ONLY transaction) or of a file, URL or extension (lockDown), as what they are. */
function refusal(e: unknown): never {
  const msg = e instanceof Error ? e.message : String(e);
  if (/read-only mode|read-only database|Cannot write to database/i.test(msg)) {
    throw new ReadOnlyQueryError(`the span store is read-only here: ${msg.split('\n')[0] ?? msg}`);
  }
  if (/^Permission Error/.test(msg)) {
    throw new ReadOnlyQueryError(`a query reads the span store's tables only (no files, URLs or extensions): ${msg.split('\n')[0] ?? msg}`);
  }
  throw e instanceof Error ? e : new Error(msg);
}
