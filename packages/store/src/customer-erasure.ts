import type { ControlDriver } from './control-store.js';

/**
 * What an erasure of a customer does to the control store (SQLite or
 * PostgreSQL), table by table: the rows that are the customer's (its alerts,
 * with their figures and delivery records, and its own budget) are deleted;
 * a key limited to named customers (`api_keys.customers`, a JSON array)
 * loses the erased id from its list. test/integration/erasure.test.ts lists
 * every table of both control stores and fails on one with a customer column
 * that is not here.
 */
export const CUSTOMER_TABLES: readonly { table: string; column: string; how: 'delete' | 'json-array' }[] = [
  { table: 'budget_events', column: 'customer_id', how: 'delete' },
  { table: 'budgets', column: 'customer_id', how: 'delete' },
  { table: 'api_keys', column: 'customers', how: 'json-array' },
];

/** Erases a customer of an org from every table above; returns the rows deleted or changed (or, dry, that would be). */
export async function eraseCustomerRows(driver: ControlDriver, orgId: string, customerId: string, dryRun: boolean): Promise<number> {
  let n = 0;
  for (const t of CUSTOMER_TABLES) {
    if (t.how === 'delete') {
      const where = `org_id = ? AND ${t.column} = ?`;
      n += dryRun
        ? Number((await driver.all<{ n: number }>(`SELECT count(*) AS n FROM ${t.table} WHERE ${where}`, [orgId, customerId]))[0]?.n ?? 0)
        : (await driver.all<{ id: string }>(`DELETE FROM ${t.table} WHERE ${where} RETURNING id`, [orgId, customerId])).length;
      continue;
    }
    // A list of ids is edited, not searched with LIKE: an id may hold any character.
    const rows = await driver.all<{ id: string; list: string }>(`SELECT id, ${t.column} AS list FROM ${t.table} WHERE org_id = ? AND ${t.column} IS NOT NULL`, [
      orgId,
    ]);
    for (const r of rows) {
      const ids = JSON.parse(r.list) as string[];
      if (!ids.includes(customerId)) continue;
      n++;
      if (!dryRun) await driver.all(`UPDATE ${t.table} SET ${t.column} = ? WHERE id = ?`, [JSON.stringify(ids.filter((c) => c !== customerId)), r.id]);
    }
  }
  return n;
}
