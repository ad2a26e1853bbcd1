import { createHash, randomUUID } from 'node:crypto';
import { UsageError } from '@trace-ingest/shared/errors';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { openControlDriver, type ControlDriverOptions } from './control-database.js';
import { eraseCustomerRows } from './customer-erasure.js';
import type { ControlDriver } from './control-store.js';
import type { SecretBox } from './secret-box.js';
import { newWebhookSecret, rotateWebhookSecret, sealWebhookSecrets, signingSecrets, type StoredWebhookSecrets } from './webhook-secrets.js';

/**
 * Monthly spend budgets and their alerts, in the control store (SQLite, or
 * PostgreSQL shared by replicas). The rules and the SQL live here once, run
 * by the control store's driver of each dialect, as console tokens are.
 *
 * - A budget covers an org (customer ''), one customer, or every customer
 *   ('*', each customer against the same amount).
 * - The most specific budget governs a customer: its own, else the
 *   every-customer one (`governing`). Alerts, GET /v1/budget, the SDK and the
 *   console all follow that one rule.
 * - An alert is one row per key: (budget, customer, month, threshold) for a
 *   threshold crossed, (budget, customer, month) for a month-end projected
 *   over the budget, (budget, customer or model, day) for a spend anomaly.
 *   Whichever replica sees it first inserts it, the others' inserts meet the
 *   unique key. Its id is derived from that key, so a receiver can
 *   deduplicate a delivery repeated after a crash.
 * - Delivery is leased: a replica claims one due alert for a while, posts it,
 *   and marks it delivered (a POST answered 2xx), none (no webhook), or sets
 *   its next attempt. `attempts` counts the POSTs made.
 */

export const ALL_CUSTOMERS = '*';
export const DEFAULT_ALERT_AT: readonly number[] = [50, 80, 100];

export interface BudgetRecord {
  id: string;
  orgId: string;
  /** '' for the org's own budget, '*' for every customer, else one customer's id. */
  customerId: string;
  monthlyUsd: string;
  /** Percentages of the budget that raise an alert, ascending. */
  alertAt: number[];
  webhookUrl: string | null;
  createdAt: number;
}

/** A threshold crossed; the month-end projected over the budget; a day's spend far above its own baseline. */
export type AlertKind = 'threshold' | 'projected' | 'anomaly';
/** pending: to be posted (or retried); delivered: a POST was answered 2xx; none: the budget has no webhook. */
export type Delivery = 'pending' | 'delivered' | 'none';

export interface BudgetEvent {
  id: string;
  budgetId: string;
  orgId: string;
  kind: AlertKind;
  /** The customer the alert is about ('' for the org, or a model's anomaly). */
  customerId: string;
  /** The model an anomaly is about ('' otherwise). */
  modelId: string;
  /** YYYY-MM (UTC). */
  month: string;
  /** YYYY-MM-DD (UTC) of an anomaly's day ('' otherwise). */
  day: string;
  /** The percentage crossed (a threshold; 100 for a projection; the factor for an anomaly). */
  threshold: number;
  /** Spent this month (an anomaly: that day). */
  spentUsd: string;
  budgetUsd: string;
  /** The kind's own figures, decimal strings: projectedUsd and crossesOn; baselineUsd. */
  detail: Record<string, string | null>;
  createdAt: number;
  /** POSTs made so far (0 with no webhook). */
  attempts: number;
  nextAttemptAt: number;
  deliveredAt: number | null;
  delivery: Delivery;
  lastError: string | null;
}

/** What a check records: the key and the figures of an alert. */
export type NewAlert = Pick<BudgetEvent, 'budgetId' | 'orgId' | 'customerId' | 'month' | 'threshold' | 'spentUsd' | 'budgetUsd'> &
  Partial<Pick<BudgetEvent, 'kind' | 'modelId' | 'day' | 'detail'>>;

/** A claimed alert, with where and how to send it. */
export interface DueEvent extends BudgetEvent {
  webhookUrl: string | null;
  /** The secrets to sign it with, opened: the budget's, and the one before a rotation while it overlaps. */
  webhookSecrets: string[];
}

interface BudgetRow {
  id: string;
  orgId: string;
  customerId: string;
  monthlyUsd: string;
  alertAt: string;
  webhookUrl: string | null;
  createdAt: number;
}

const BUDGET_SELECT = `SELECT id, org_id AS "orgId", customer_id AS "customerId", monthly_usd AS "monthlyUsd", alert_at AS "alertAt",
  webhook_url AS "webhookUrl", created_at AS "createdAt" FROM budgets`;
const EVENT_COLUMNS = `e.id AS id, e.budget_id AS "budgetId", e.org_id AS "orgId", e.kind AS kind, e.customer_id AS "customerId",
  e.model_id AS "modelId", e.month AS month, e.day AS day, e.threshold AS threshold, e.spent_usd AS "spentUsd", e.budget_usd AS "budgetUsd",
  e.detail AS detail, e.created_at AS "createdAt", e.attempts AS attempts, e.next_attempt_at AS "nextAttemptAt", e.delivered_at AS "deliveredAt",
  e.delivery AS delivery, e.last_error AS "lastError"`;

const toBudget = (r: BudgetRow): BudgetRecord => ({
  ...r,
  createdAt: Number(r.createdAt),
  alertAt: r.alertAt
    .split(',')
    .filter((x) => x !== '')
    .map(Number),
});

const toEvent = <T extends BudgetEvent>(r: T): T => ({
  ...r,
  detail: typeof r.detail === 'string' ? (JSON.parse(r.detail) as BudgetEvent['detail']) : r.detail,
  threshold: Number(r.threshold),
  createdAt: Number(r.createdAt),
  attempts: Number(r.attempts),
  nextAttemptAt: Number(r.nextAttemptAt),
  deliveredAt: r.deliveredAt === null ? null : Number(r.deliveredAt),
});

/** The stable id of the alert of (budget, customer, month, threshold). */
export function budgetEventId(budgetId: string, customerId: string, month: string, threshold: number): string {
  return `bev_${createHash('sha256').update(`${budgetId}\u0000${customerId}\u0000${month}\u0000${threshold}`).digest('hex').slice(0, 32)}`;
}

/** The stable id of any alert: a threshold's as before this kind of key existed, the others' from their whole key. */
export function alertId(a: NewAlert): string {
  const kind = a.kind ?? 'threshold';
  if (kind === 'threshold') return budgetEventId(a.budgetId, a.customerId, a.month, a.threshold);
  const key = [kind, a.budgetId, a.customerId, a.modelId ?? '', a.month, a.day ?? '', a.threshold].join('\u0000');
  return `bev_${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

/**
 * The budget that governs a customer: its own, else the every-customer
 * budget ('' asks for the org's own). One rule for alerts, the API and the console.
 */
export function governing(budgets: readonly BudgetRecord[], orgId: string, customerId: string): BudgetRecord | undefined {
  const of = budgets.filter((b) => b.orgId === orgId);
  if (customerId === '') return of.find((b) => b.customerId === '');
  return of.find((b) => b.customerId === customerId) ?? of.find((b) => b.customerId === ALL_CUSTOMERS);
}

/** Alert percentages from "50,80,100": whole numbers 1..1000, ascending, no repeats. */
export function parseAlertAt(text: string): number[] {
  const parts = text.split(',').map((p) => p.trim());
  const out: number[] = [];
  for (const p of parts) {
    if (!/^\d{1,4}$/.test(p) || Number(p) < 1 || Number(p) > 1000)
      throw new UsageError(`--alert-at: "${p}" is not a whole percentage between 1 and 1000 (e.g. 50,80,100)`);
    out.push(Number(p));
  }
  return [...new Set(out)].sort((a, b) => a - b);
}

export class Budgets {
  constructor(
    private readonly driver: ControlDriver,
    /** Seals webhook secrets at rest. */
    private readonly secrets: SecretBox,
  ) {}

  start(): Promise<void> {
    return this.driver.open();
  }

  close(): Promise<void> {
    return this.driver.close();
  }

  /**
   * Sets (or replaces) the budget of an org, a customer or every customer.
   * A webhook gets a secret made here, returned once; a budget that already
   * had a webhook keeps its secret.
   */
  async set(input: { orgId: string; customerId: string; monthlyUsd: string; alertAt: readonly number[]; webhookUrl: string | null }): Promise<{
    budget: BudgetRecord;
    secret?: string;
  }> {
    let amount: bigint;
    try {
      amount = parseDecimal(input.monthlyUsd);
    } catch {
      throw new UsageError(`--monthly-usd: not a decimal amount: ${input.monthlyUsd}`);
    }
    if (amount <= 0n) throw new UsageError('--monthly-usd: must be more than 0');
    if (input.webhookUrl !== null) {
      let u: URL;
      try {
        u = new URL(input.webhookUrl);
      } catch {
        throw new UsageError(`--webhook: not a URL: ${input.webhookUrl}`);
      }
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError('--webhook: must be an http:// or https:// URL');
    }
    const [existing] = await this.driver.all<BudgetRow & { webhookSecret: string | null }>(
      `SELECT id, webhook_secret AS "webhookSecret" FROM budgets WHERE org_id = ? AND customer_id = ?`,
      [input.orgId, input.customerId],
    );
    // A new webhook secret is shown once and stored sealed; a budget that had one keeps it.
    const fresh = input.webhookUrl !== null && (existing?.webhookSecret ?? null) === null ? newWebhookSecret() : undefined;
    const secret = input.webhookUrl === null ? null : fresh === undefined ? (existing?.webhookSecret ?? null) : this.secrets.seal(fresh);
    const budget: BudgetRecord = {
      id: existing?.id ?? `bud_${randomUUID().replaceAll('-', '')}`,
      orgId: input.orgId,
      customerId: input.customerId,
      monthlyUsd: formatDecimal(amount),
      alertAt: [...input.alertAt],
      webhookUrl: input.webhookUrl,
      createdAt: Date.now(),
    };
    const values = [budget.monthlyUsd, budget.alertAt.join(','), budget.webhookUrl, secret];
    if (existing === undefined)
      await this.driver.all(
        'INSERT INTO budgets (id, org_id, customer_id, monthly_usd, alert_at, webhook_url, webhook_secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        [budget.id, budget.orgId, budget.customerId, ...values, budget.createdAt],
      );
    else await this.driver.all('UPDATE budgets SET monthly_usd = ?, alert_at = ?, webhook_url = ?, webhook_secret = ? WHERE id = ?', [...values, budget.id]);
    return { budget, ...(fresh === undefined ? {} : { secret: fresh }) };
  }

  async list(orgId?: string): Promise<BudgetRecord[]> {
    const rows =
      orgId === undefined
        ? await this.driver.all<BudgetRow>(`${BUDGET_SELECT} ORDER BY org_id, customer_id`, [])
        : await this.driver.all<BudgetRow>(`${BUDGET_SELECT} WHERE org_id = ? ORDER BY customer_id`, [orgId]);
    return rows.map(toBudget);
  }

  /** Removes a budget; false when there was none. Its past alerts stay. */
  async unset(orgId: string, customerId: string): Promise<boolean> {
    const gone = await this.driver.all<{ id: string }>('DELETE FROM budgets WHERE org_id = ? AND customer_id = ? RETURNING id', [orgId, customerId]);
    return gone.length > 0;
  }

  /** Records an alert; false when it exists already (another replica, an earlier check). */
  async record(e: NewAlert, now = Date.now()): Promise<boolean> {
    const id = alertId(e);
    try {
      const rows = await this.driver.all<{ id: string }>(
        'INSERT INTO budget_events (id, budget_id, org_id, kind, customer_id, model_id, month, day, threshold, spent_usd, budget_usd, detail, ' +
          'created_at, attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT DO NOTHING RETURNING id',
        [
          id,
          e.budgetId,
          e.orgId,
          e.kind ?? 'threshold',
          e.customerId,
          e.modelId ?? '',
          e.month,
          e.day ?? '',
          e.threshold,
          e.spentUsd,
          e.budgetUsd,
          JSON.stringify(e.detail ?? {}),
          now,
          now,
        ],
      );
      return rows.length > 0;
    } catch (err) {
      if (this.driver.isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async events(opts: { orgId?: string | undefined; limit?: number } = {}): Promise<BudgetEvent[]> {
    const limit = Math.max(1, Math.trunc(opts.limit ?? 100));
    const rows =
      opts.orgId === undefined
        ? await this.driver.all<BudgetEvent>(`SELECT ${EVENT_COLUMNS} FROM budget_events e ORDER BY e.created_at DESC, e.id LIMIT ${limit}`, [])
        : await this.driver.all<BudgetEvent>(
            `SELECT ${EVENT_COLUMNS} FROM budget_events e WHERE e.org_id = ? ORDER BY e.created_at DESC, e.id LIMIT ${limit}`,
            [opts.orgId],
          );
    return rows.map(toEvent);
  }

  /**
   * Claims the oldest alert that is due and not claimed (or whose claim ran
   * out) for `leaseMs`. Two replicas claiming at once: the database's row
   * lock lets one update win; the other's condition no longer holds.
   */
  async claim(owner: string, leaseMs: number, now = Date.now()): Promise<DueEvent | undefined> {
    const free = "delivery = 'pending' AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until < ?)";
    const [won] = await this.driver.all<{ id: string }>(
      'UPDATE budget_events SET claimed_by = ?, claimed_until = ? ' +
        `WHERE id = (SELECT id FROM budget_events WHERE ${free} ORDER BY created_at, id LIMIT 1) AND ${free} RETURNING id`,
      [owner, now + leaseMs, now, now, now, now],
    );
    if (won === undefined) return undefined;
    const [row] = await this.driver.all<Omit<DueEvent, 'webhookSecrets'> & StoredWebhookSecrets>(
      `SELECT ${EVENT_COLUMNS}, b.webhook_url AS "webhookUrl", b.webhook_secret AS "webhookSecret", ` +
        'b.webhook_secret_previous AS "webhookSecretPrevious", b.webhook_secret_previous_until AS "webhookSecretPreviousUntil" ' +
        'FROM budget_events e LEFT JOIN budgets b ON b.id = e.budget_id WHERE e.id = ?',
      [won.id],
    );
    if (row === undefined) return undefined;
    const { webhookSecret, webhookSecretPrevious, webhookSecretPreviousUntil, ...event } = row;
    return { ...toEvent(event), webhookSecrets: signingSecrets(this.secrets, { webhookSecret, webhookSecretPrevious, webhookSecretPreviousUntil }, now) };
  }

  /** A new signing secret for a budget's webhook (returned once); the old one signs beside it for `overlapMs`. */
  rotateSecret(orgId: string, customerId: string, overlapMs: number): Promise<string> {
    return rotateWebhookSecret(this.driver, this.secrets, { orgId, customerId }, overlapMs);
  }

  /** Seals secrets stored in plain text or under an older key (server start, `migrate`); how many. */
  sealSecrets(): Promise<number> {
    return sealWebhookSecrets(this.driver, this.secrets);
  }

  /** A POST answered 2xx: counted as an attempt, and done. */
  async delivered(id: string, owner: string, now = Date.now()): Promise<void> {
    await this.driver.all(
      "UPDATE budget_events SET delivery = 'delivered', attempts = attempts + 1, delivered_at = ?, claimed_by = NULL, claimed_until = NULL, " +
        'last_error = NULL WHERE id = ? AND claimed_by = ?',
      [now, id, owner],
    );
  }

  /** No webhook to post to (or the budget is gone): recorded, shown by `budgets events`, never posted. */
  async undeliverable(id: string, owner: string): Promise<void> {
    await this.driver.all("UPDATE budget_events SET delivery = 'none', claimed_by = NULL, claimed_until = NULL WHERE id = ? AND claimed_by = ?", [id, owner]);
  }

  /**
   * Erases what names a customer of an org in the control store (its alerts,
   * its own budget, its id in keys limited to named customers: see
   * customer-erasure.ts). Returns the rows deleted or changed (or, dry, that would be).
   */
  async eraseCustomer(orgId: string, customerId: string, dryRun: boolean): Promise<{ controlRows: number }> {
    return { controlRows: await eraseCustomerRows(this.driver, orgId, customerId, dryRun) };
  }

  async failed(id: string, owner: string, error: string, nextAttemptAt: number): Promise<void> {
    await this.driver.all(
      'UPDATE budget_events SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?, claimed_by = NULL, claimed_until = NULL ' +
        'WHERE id = ? AND claimed_by = ?',
      [nextAttemptAt, error.slice(0, 500), id, owner],
    );
  }
}

/** The budgets in the control store's database: PostgreSQL when DATABASE_URL is set, else the SQLite file. */
export async function openBudgets(opts: ControlDriverOptions & { secrets: SecretBox }): Promise<Budgets> {
  return new Budgets(await openControlDriver(opts), opts.secrets);
}
