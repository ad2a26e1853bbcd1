import { addDays, utcDay } from '@trace-ingest/shared/dates';
import {
  ERASE_COLUMN,
  rollupsNaming,
  TEXT_COLUMNS,
  type EraseCounts,
  type EraseTarget,
  type RetentionCut,
  type RetentionResult,
} from '@trace-ingest/shared/lifecycle';
import { DERIVED_TABLES, derivedTable } from './clickhouse-derive.js';
import { inChunks } from './clickhouse-rollups.js';
import { bindParams } from './clickhouse-sql.js';
import type { ClickHouseTopLists } from './clickhouse-top-lists.js';
import type { QueryRow } from './span-store.js';
import { TOP_LISTS_WINDOW_DAYS } from './top-lists.js';

/** What the lifecycle needs of its store's connection. */
export interface LifecycleServer {
  query(sql: string, params?: readonly unknown[]): Promise<QueryRow[]>;
  queryStream(sql: string): AsyncIterable<QueryRow>;
  command(sql: string): Promise<void>;
  /** The store's database (system.mutations is read for it). */
  database: string;
  /** How long an erasure or retention waits for its mutations (default 10 minutes). */
  mutationTimeoutMs?: number | undefined;
}

/** Retention and erasure of a ClickHouse span store: mutations of the spans and of the derived tables. */
export class ClickHouseLifecycle {
  /** The text cut day each org's texts were last emptied up to (in memory: after a restart, the first pass looks at every day). */
  private readonly textMarks = new Map<string, string>();

  constructor(
    private readonly server: LifecycleServer,
    private readonly topLists: ClickHouseTopLists,
  ) {}

  /**
   * Retention by mutations, which 18.16 and current servers both run: an
   * ALTER ... DELETE of the org's expired days (and their `traces` rows) when
   * any row is there (a count on the sorting key, cheap), and an ALTER ...
   * UPDATE emptying the texts of the days past the text cut. A mutation
   * rewrites the parts holding matching rows, so texts are looked for only
   * in the days since the last cut (a span that arrives already past its
   * text cut is written without texts). The derived rows of the
   * expired days are deleted with them.
   */
  async expire(cut: RetentionCut, _maxRows: number): Promise<RetentionResult> {
    const out: RetentionResult = { deletedRows: 0, emptiedRows: 0, done: true };
    const org = cut.orgId;
    if (cut.rowsBefore !== undefined) {
      const where = bindParams('org_id = ? AND start_date < toDate(?)', [org, utcDay(cut.rowsBefore)]);
      out.deletedRows = await this.countFinal(where);
      if (out.deletedRows > 0) await this.mutate('spans', `DELETE WHERE ${where}`);
      // Every derived row of the expired days goes (traces name customers), whether or not a TTL merge dropped their spans first.
      let derived = 0;
      for (const t of DERIVED_TABLES) {
        const n = await this.count(derivedTable(t), where);
        if (n > 0) await this.mutate(derivedTable(t), `DELETE WHERE ${where}`);
        derived += n;
      }
      if (out.deletedRows + derived > 0) {
        const before = `toDate('${utcDay(cut.rowsBefore)}')`;
        await this.topLists.forget(org, { trace: [`start_date < ${before}`] }, addDays(utcDay(cut.rowsBefore), TOP_LISTS_WINDOW_DAYS));
      }
    }
    if (cut.textsBefore !== undefined) {
      const day = utcDay(cut.textsBefore);
      const since = this.textMarks.get(org);
      if (since !== day) {
        const texts = `(${TEXT_COLUMNS.map((c) => `${c} != ''`).join(' OR ')})`;
        const where = bindParams(`org_id = ? AND start_date < toDate(?)${since === undefined ? '' : ' AND start_date >= toDate(?)'} AND ${texts}`, [
          org,
          day,
          ...(since === undefined ? [] : [since]),
        ]);
        out.emptiedRows = await this.countFinal(where);
        if (out.emptiedRows > 0) await this.mutate('spans', `UPDATE ${TEXT_COLUMNS.map((c) => `${c} = ''`).join(', ')} WHERE ${where}`);
        this.textMarks.set(org, day);
      }
    }
    return out;
  }

  /**
   * Erasure: mutations delete the spans (every copy), the erased traces'
   * derived rows and the derived rows that carry the id (every derivation's);
   * the days it touched are recorded as changed, so the derivation derives
   * them again without the erased spans. It returns once its mutations are
   * done. The counts are of logical rows (the current derivation's).
   */
  async erase(orgId: string, target: EraseTarget, dryRun: boolean): Promise<EraseCounts> {
    const where = bindParams(`org_id = ? AND ${ERASE_COLUMN[target.kind]} = ?`, [orgId, target.id]);
    const traceIds: string[] = [];
    const sessionIds = new Set<string>();
    const days = new Set<string>();
    for await (const r of this.server.queryStream(
      `SELECT trace_id, groupUniqArray(session_id) AS s, groupUniqArray(toString(start_date)) AS d FROM spans WHERE ${where} GROUP BY trace_id`,
    )) {
      traceIds.push(String(r.trace_id));
      for (const s of r.s as string[]) sessionIds.add(s);
      for (const d of r.d as string[]) days.add(d);
    }
    const named = rollupsNaming(target.kind).map((r) => ({ table: r.table, where: bindParams(`org_id = ? AND ${r.column} = ?`, [orgId, target.id]) }));
    // IN lists of at most 5,000 ids, each within ClickHouse's query size.
    const idsIn = (column: string, ids: readonly string[]) =>
      inChunks(ids, 5000).map((part) => bindParams(`${column} IN (${part.map(() => '?').join(', ')})`, part));
    const traceIn = idsIn('trace_id', traceIds);
    const traceWheres = traceIn.map((w) => `${bindParams('org_id = ?', [orgId])} AND ${w}`);
    let rollupRows = 0;
    for (const w of traceWheres) rollupRows += await this.count('traces', w);
    for (const n of named) rollupRows += await this.count(n.table, n.where);
    const counts = { spans: await this.countFinal(where), traces: traceIds.length, rollupRows };
    if (dryRun) return counts;
    let derivedRows = 0;
    for (const w of traceWheres) derivedRows += await this.count(derivedTable('traces'), w);
    for (const n of named) derivedRows += await this.count(derivedTable(n.table), n.where);
    if (counts.spans + derivedRows === 0) return counts;
    await this.mutate('spans', `DELETE WHERE ${where}`);
    for (const w of traceWheres) await this.mutate(derivedTable('traces'), `DELETE WHERE ${w}`);
    for (const n of named) await this.mutate(derivedTable(n.table), `DELETE WHERE ${n.where}`);
    if (days.size > 0)
      await this.server.command(
        `INSERT INTO span_changes (org_id, start_date, rows) VALUES ${[...days].map((d) => bindParams('(?, toDate(?), 1)', [orgId, d])).join(', ')}`,
      );
    await this.topLists.forget(orgId, { trace: traceIn, session: idsIn('session_id', [...sessionIds]) });
    return counts;
  }

  /** Rows of a table or derived view (the views show one derivation's rows, so the figure does not move with merges). */
  private async count(table: string, where: string): Promise<number> {
    const [r] = await this.server.query(`SELECT count() AS n FROM ${table} WHERE ${where}`);
    return Number(r?.n ?? 0);
  }

  /** Spans matching `where`, one per span. */
  private async countFinal(where: string): Promise<number> {
    const [r] = await this.server.query(`SELECT count() AS n FROM (SELECT org_id FROM spans FINAL WHERE ${where})`);
    return Number(r?.n ?? 0);
  }

  /**
   * Runs a mutation and waits until the server has applied it (18.16 has no
   * mutations_sync): the mutations of the table that appeared with it, not
   * every mutation of the table.
   */
  async mutate(table: string, action: string): Promise<void> {
    const ids = async () =>
      (await this.server.query('SELECT mutation_id AS id FROM system.mutations WHERE database = ? AND table = ?', [this.server.database, table])).map((r) =>
        String(r.id),
      );
    const before = new Set(await ids());
    await this.server.command(`ALTER TABLE ${table} ${action}`);
    const mine = (await ids()).filter((id) => !before.has(id));
    if (mine.length === 0) return;
    const deadline = Date.now() + (this.server.mutationTimeoutMs ?? 600_000);
    for (;;) {
      const [r] = await this.server.query(
        'SELECT count() AS n FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0 AND has(?, mutation_id)',
        [this.server.database, table, mine],
      );
      if (Number(r?.n ?? 0) === 0) return;
      if (Date.now() > deadline) throw new Error(`a mutation of ${table} did not finish in time; it goes on in the background`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }
}
