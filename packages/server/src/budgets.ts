import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { backoffMs } from '@trace-ingest/shared/backoff';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { ALL_CUSTOMERS, type BudgetRecord, type Budgets, type DueEvent } from '@trace-ingest/store/budgets';
import { usageReport } from '@trace-ingest/store/reports';
import type { SpanStore } from '@trace-ingest/store/span-store';
import type { Metrics } from './metrics.js';
import { postWebhook } from './webhook-post.js';

/**
 * Budgets at run time: the spend of each org (and customer) this month, read
 * from the span store's rollups, checked against the budgets every few
 * seconds and after each flush; thresholds crossed become alerts (one per
 * budget, customer, month and threshold, whatever the replicas), which the
 * deliverer posts to the budget's webhook, signed.
 *
 * Spend counts spans by their start time in the UTC month, as `usage
 * --month` does, so a late span of the previous month counts there: the
 * previous month is checked too, and its alerts carry its month.
 */

const DAY_MS = 86_400_000;
const erasedKey = (orgId: string, customerId: string) => `${orgId}\u0000${customerId}`;

export interface BudgetStatus {
  budgetUsd: string | null;
  spentUsd: string;
  remainingUsd: string | null;
  /** Alert percentages reached this month. */
  crossed: number[];
}

export interface BudgetAnswer {
  month: string;
  org: BudgetStatus;
  customer?: BudgetStatus & { id: string };
  /** When the spend was last read (epoch ms): spans are counted once flushed. */
  asOf: number;
}

interface OrgMonth {
  month: string;
  total: bigint;
  customers: Map<string, bigint>;
  readAt: number;
}

export interface BudgetWatcherOptions {
  checkMs: number;
  /** Customer ids as metric labels (METRICS_CUSTOMER_LABELS); off, a customer's series carries its budget's id only. */
  customerLabels?: boolean;
  orgName(orgId: string): Promise<string | undefined>;
  now?: () => number;
}

export function monthOf(ms: number): { month: string; from: number; to: number } {
  const d = new Date(ms);
  const from = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  return { month: new Date(from).toISOString().slice(0, 7), from, to: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) };
}

/** Percent of `budget` that `spent` reaches, exactly: spent * 100 >= budget * p. */
function crossed(spent: bigint, budget: bigint, alertAt: readonly number[]): number[] {
  return alertAt.filter((p) => spent * 100n >= budget * BigInt(p));
}

function status(spent: bigint, budget: BudgetRecord | undefined): BudgetStatus {
  if (budget === undefined) return { budgetUsd: null, spentUsd: formatDecimal(spent), remainingUsd: null, crossed: [] };
  const amount = parseDecimal(budget.monthlyUsd);
  return {
    budgetUsd: budget.monthlyUsd,
    spentUsd: formatDecimal(spent),
    remainingUsd: formatDecimal(amount - spent),
    crossed: crossed(spent, amount, budget.alertAt),
  };
}

export class BudgetWatcher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private budgets: BudgetRecord[] = [];
  /** The current month's spend per org, as last read. */
  private readonly spend = new Map<string, OrgMonth>();
  /** Customers erased while this process runs: never a metric label again. */
  private readonly erased = new Set<string>();
  /** Orgs asked about through GET /v1/budget lately: kept fresh too. */
  private readonly asked = new Map<string, number>();
  private readonly now: () => number;
  /** Called after a check that recorded alerts. */
  onAlerts: () => void = () => undefined;

  constructor(
    private readonly store: Budgets,
    private readonly spans: SpanStore,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
    private readonly opts: BudgetWatcherOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setInterval(() => this.poke(), this.opts.checkMs);
    this.timer.unref();
    this.poke();
  }

  /** Checks soon (after a flush); one check at a time, and one more if asked meanwhile. */
  poke(): void {
    if (this.closed) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.check()
      .catch((e: unknown) => this.logger.warn({ err: e }, 'budget check failed; retried at the next one'))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.poke();
        }
      });
  }

  /** Runs a check now and waits for it (tests, shutdown). */
  async checkNow(): Promise<void> {
    while (this.running !== undefined) await this.running;
    await this.check();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async readMonth(orgId: string, at: number): Promise<OrgMonth> {
    const m = monthOf(at);
    // Whole UTC days: the rollups answer it, whatever the number of spans.
    const rows = await usageReport(this.spans, { orgId, from: m.from, to: m.to, by: 'customer' });
    const customers = new Map<string, bigint>();
    let total = 0n;
    for (const r of rows) {
      const c = parseDecimal(r.costs.total_cost);
      customers.set(r.group, c);
      total += c;
    }
    return { month: m.month, total, customers, readAt: this.now() };
  }

  private async check(): Promise<void> {
    this.budgets = await this.store.list();
    const now = this.now();
    for (const [org, at] of this.asked) if (now - at > 10 * 60_000) this.asked.delete(org);
    const orgs = new Set([...this.budgets.map((b) => b.orgId), ...this.asked.keys()]);
    let recorded = 0;
    for (const orgId of orgs) {
      const current = await this.readMonth(orgId, now);
      this.spend.set(orgId, current);
      const budgets = this.budgets.filter((b) => b.orgId === orgId);
      if (budgets.length === 0) continue;
      recorded += await this.alerts(budgets, current);
      // Late spans of last month count there (its alerts carry its month), for a few days into this one.
      const previous = monthOf(monthOf(now).from - 1);
      if (now - previous.to < 3 * DAY_MS) recorded += await this.alerts(budgets, await this.readMonth(orgId, previous.from));
    }
    this.updateGauges();
    if (recorded > 0) this.onAlerts();
  }

  /** Records the alerts of thresholds the month's spend has crossed; returns how many are new. */
  private async alerts(budgets: readonly BudgetRecord[], m: OrgMonth): Promise<number> {
    let n = 0;
    for (const b of budgets) {
      const amount = parseDecimal(b.monthlyUsd);
      const subjects: [string, bigint][] =
        b.customerId === '' ? [['', m.total]] : b.customerId === ALL_CUSTOMERS ? [...m.customers] : [[b.customerId, m.customers.get(b.customerId) ?? 0n]];
      for (const [customer, spent] of subjects) {
        if (b.customerId === ALL_CUSTOMERS && customer === '') continue;
        for (const threshold of crossed(spent, amount, b.alertAt)) {
          const fresh = await this.store.record({
            budgetId: b.id,
            orgId: b.orgId,
            customerId: customer,
            month: m.month,
            threshold,
            spentUsd: formatDecimal(spent),
            budgetUsd: b.monthlyUsd,
          });
          if (fresh) {
            n++;
            this.metrics.budgetAlerts.inc();
            this.logger.info({ org: b.orgId, customer, month: m.month, threshold }, 'budget threshold crossed');
          }
        }
      }
    }
    return n;
  }

  private updateGauges(): void {
    this.metrics.budgetSpend.reset();
    this.metrics.budgetAmount.reset();
    for (const b of this.budgets) {
      const m = this.spend.get(b.orgId);
      if (m === undefined || b.customerId === ALL_CUSTOMERS || this.erased.has(erasedKey(b.orgId, b.customerId))) continue;
      // Per customer only for customers with a budget of their own: label cardinality stays that of the budgets.
      const spent = b.customerId === '' ? m.total : (m.customers.get(b.customerId) ?? 0n);
      const labels = { org: b.orgId, budget: b.id, customer: this.opts.customerLabels === true ? b.customerId : '' };
      this.metrics.budgetSpend.set(labels, Number(formatDecimal(spent)));
      this.metrics.budgetAmount.set(labels, Number(b.monthlyUsd));
    }
    for (const [orgId, m] of this.spend)
      if (!this.budgets.some((b) => b.orgId === orgId && b.customerId === ''))
        this.metrics.budgetSpend.set({ org: orgId, budget: '', customer: '' }, Number(formatDecimal(m.total)));
  }

  /**
   * An erased customer leaves the metrics at once, not at the next check,
   * and is not named in them again by this process (a budget left for it
   * included): its spend is gone from the store, and its id from memory.
   */
  forgetCustomer(orgId: string, customerId: string): void {
    this.erased.add(erasedKey(orgId, customerId));
    this.spend.get(orgId)?.customers.delete(customerId);
    this.updateGauges();
  }

  /**
   * The budget of an org (and a customer) for GET /v1/budget, from the last
   * check: a map lookup. An org asked for the first time is read once now.
   */
  async answer(orgId: string, customer: string | undefined): Promise<BudgetAnswer> {
    const now = this.now();
    this.asked.set(orgId, now);
    let m = this.spend.get(orgId);
    if (m === undefined || m.month !== monthOf(now).month) {
      m = await this.readMonth(orgId, now);
      this.spend.set(orgId, m);
    }
    const budgets = this.budgets.filter((b) => b.orgId === orgId);
    const out: BudgetAnswer = {
      month: m.month,
      org: status(
        m.total,
        budgets.find((b) => b.customerId === ''),
      ),
      asOf: m.readAt,
    };
    if (customer !== undefined) {
      const own = budgets.find((b) => b.customerId === customer) ?? budgets.find((b) => b.customerId === ALL_CUSTOMERS);
      out.customer = { id: customer, ...status(m.customers.get(customer) ?? 0n, own) };
    }
    return out;
  }

  /** Budgets and this month's spend of an org, for the console. */
  async forConsole(orgId: string): Promise<{ budget: BudgetStatus | null; customers: Record<string, BudgetStatus> }> {
    // A page view reads the budgets as they are now (one small query), not as of the last check.
    this.budgets = await this.store.list();
    const a = await this.answer(orgId, undefined);
    const m = this.spend.get(orgId);
    const customers: Record<string, BudgetStatus> = {};
    for (const b of this.budgets.filter((x) => x.orgId === orgId && x.customerId !== '')) {
      if (b.customerId === ALL_CUSTOMERS) {
        for (const [c, spent] of m?.customers ?? []) if (c !== '' && customers[c] === undefined) customers[c] = status(spent, b);
      } else customers[b.customerId] = status(m?.customers.get(b.customerId) ?? 0n, b);
    }
    return { budget: a.org.budgetUsd === null ? null : a.org, customers };
  }
}

export interface DelivererOptions {
  timeoutMs: number;
  /** How long a claim holds before another replica may deliver the alert. */
  leaseMs?: number;
  orgName(orgId: string): Promise<string | undefined>;
}

/**
 * Posts alerts to their budgets' webhooks, one at a time, signed with the
 * budget's secret over a timestamp and the body (webhook-post.ts). A failure
 * (no answer, a redirect, not 2xx) is retried with backoff, up to a day
 * apart, until it goes through; a replica that stops mid-delivery lets its
 * claim run out and the alert is posted again, with the same id.
 */
export class AlertDeliverer {
  private readonly owner = `deliverer_${randomUUID()}`;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly store: Budgets,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
    private readonly opts: DelivererOptions,
  ) {}

  start(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setInterval(() => this.poke(), 1000);
    this.timer.unref();
    this.poke();
  }

  poke(): void {
    if (this.closed || this.running !== undefined) return;
    this.running = this.drain()
      .catch((e: unknown) => this.logger.warn({ err: e }, 'alert delivery failed; retried'))
      .finally(() => (this.running = undefined));
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.closed) return;
      const e = await this.store.claim(this.owner, this.opts.leaseMs ?? this.opts.timeoutMs * 3);
      if (e === undefined) return;
      await this.deliver(e);
    }
  }

  private async deliver(e: DueEvent): Promise<void> {
    if (e.webhookUrl === null || e.webhookSecrets.length === 0) {
      // No webhook (or the budget is gone): the alert is recorded and shown by `budgets events`.
      await this.store.delivered(e.id, this.owner);
      return;
    }
    const body = JSON.stringify({
      id: e.id,
      type: 'budget.threshold_crossed',
      org: { id: e.orgId, name: (await this.opts.orgName(e.orgId)) ?? '' },
      customer: e.customerId === '' ? null : e.customerId,
      budgetUsd: e.budgetUsd,
      spentUsd: e.spentUsd,
      threshold: e.threshold,
      month: e.month,
      createdAt: new Date(e.createdAt).toISOString(),
    });
    try {
      await postWebhook(e.webhookUrl, { id: e.id, body, secrets: e.webhookSecrets }, this.opts.timeoutMs);
      await this.store.delivered(e.id, this.owner);
      this.metrics.budgetDeliveries.inc({ outcome: 'delivered' });
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      const next = Date.now() + backoffMs(e.attempts, { minMs: 1000, maxMs: DAY_MS });
      await this.store.failed(e.id, this.owner, why, next);
      this.metrics.budgetDeliveries.inc({ outcome: 'failed' });
      // The URL is the ops' own setting; the secret never leaves the signature.
      this.logger.warn({ event: e.id, attempts: e.attempts + 1, error: why }, 'budget alert not delivered; retried with backoff');
    }
  }
}
