import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { backoffMs } from '@trace-ingest/shared/backoff';
import { DAY_MS, utcDay } from '@trace-ingest/shared/dates';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { ALL_CUSTOMERS, governing, type BudgetRecord, type Budgets, type DueEvent, type NewAlert } from '@trace-ingest/store/budgets';
import {
  anomalyOf,
  DEFAULT_ANOMALY,
  forecastOf,
  readHistory,
  readSpend,
  backtest,
  type AnomalyRule,
  type Forecast,
  type SpendSnapshot,
} from '@trace-ingest/store/forecast';
import { usageReport } from '@trace-ingest/store/reports';
import type { Lease, SpanStore } from '@trace-ingest/store/span-store';
import type { Metrics } from './metrics.js';
import { postWebhook } from './webhook-post.js';

/**
 * Budgets at run time: the spend of each org (and customer) this month, read
 * from the span store's rollups, checked against the budgets every few
 * seconds and after each flush. The most specific budget governs a customer
 * (its own, else the every-customer one). A check records alerts, each once
 * whatever the replicas, which the deliverer posts to the budget's webhook,
 * signed:
 * - a threshold crossed (once per budget, customer, month and threshold);
 * - the month-end projected over the budget (once per budget, customer and month);
 * - a spend anomaly: a customer's or model's cost today far above its own
 *   recent baseline (once per subject and day; the rule is in store/forecast.ts).
 *
 * Spend counts spans by their start time in the UTC month, as `usage
 * --month` does, so a late span of the previous month counts there: the
 * previous month is checked too, and its alerts carry its month.
 */

const erasedKey = (orgId: string, customerId: string) => `${orgId}\u0000${customerId}`;
/**
 * A model's spend (for its anomalies) is read again at most every this many
 * checks (a minute at the default BUDGET_CHECK_MS), or on a new day, and only
 * when the org's spend today moved: an anomaly is a matter of the day, not of
 * seconds. Every check reads the spend by customer.
 */
const MODEL_READ_CHECKS = 12;

export interface BudgetStatus {
  budgetUsd: string | null;
  spentUsd: string;
  remainingUsd: string | null;
  /** Alert percentages reached this month. */
  crossed: number[];
  /** Where the month will end (null before a day of spend in the last 14). */
  forecast: Forecast | null;
}

/** The org's status: its forecast also says how far off the same forecast was on the org's past months. */
export interface OrgBudgetStatus extends BudgetStatus {
  forecast: (Forecast & { errorPct: string | null; errorMonths: number }) | null;
}

export interface BudgetAnswer {
  month: string;
  org: OrgBudgetStatus;
  customer?: BudgetStatus & { id: string };
  /** When the spend was last read (epoch ms): spans are counted once flushed. */
  asOf: number;
}

/** A month's spend of an org: its total and each customer's. */
interface MonthSpend {
  month: string;
  total: bigint;
  customers: Map<string, bigint>;
}

export interface BudgetWatcherOptions {
  checkMs: number;
  /** Customer ids as metric labels (METRICS_CUSTOMER_LABELS); off, a customer's series carries its budget's id only. */
  customerLabels?: boolean;
  orgName(orgId: string): Promise<string | undefined>;
  now?: () => number;
  anomaly?: AnomalyRule;
  /** The cluster's budget-check lease (replicas sharing PostgreSQL): only its holder records alerts; none, this process alone. */
  lease?: Lease | undefined;
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

function status(spent: bigint, budget: BudgetRecord | undefined, forecast: Forecast | null): BudgetStatus {
  if (budget === undefined) return { budgetUsd: null, spentUsd: formatDecimal(spent), remainingUsd: null, crossed: [], forecast };
  const amount = parseDecimal(budget.monthlyUsd);
  return {
    budgetUsd: budget.monthlyUsd,
    spentUsd: formatDecimal(spent),
    remainingUsd: formatDecimal(amount - spent),
    crossed: crossed(spent, amount, budget.alertAt),
    forecast,
  };
}

const monthSpendOf = (s: SpendSnapshot): MonthSpend => ({
  month: s.month,
  total: s.total.month,
  customers: new Map([...s.groups].map(([c, g]) => [c, g.month])),
});

/** The subjects a budget governs in a month's spend: the org, one customer, or each customer without a budget of its own. */
function subjectsOf<T>(budgets: readonly BudgetRecord[], b: BudgetRecord, total: T, customers: ReadonlyMap<string, T>, none: T): [string, T][] {
  if (b.customerId === '') return [['', total]];
  if (b.customerId !== ALL_CUSTOMERS) return [[b.customerId, customers.get(b.customerId) ?? none]];
  return [...customers].filter(([c]) => c !== '' && governing(budgets, b.orgId, c) === b);
}

export class BudgetWatcher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private budgets: BudgetRecord[] = [];
  /** This month's spend of each org by customer, as last read. */
  private readonly spend = new Map<string, SpendSnapshot>();
  /** Each org's daily cost of past months (its forecast's error), read once a UTC day: org totals only, no customer. */
  private readonly history = new Map<string, { day: string; errorPct: string | null; errorMonths: number }>();
  /** Customers erased while this process runs: never a metric label again. */
  private readonly erased = new Set<string>();
  /** Each org's spend by model (for model anomalies), as last read, and when (monotonic ms). */
  private readonly models = new Map<string, { snap: SpendSnapshot; at: number }>();
  /** Orgs asked about through GET /v1/budget lately: kept fresh too. */
  private readonly asked = new Map<string, number>();
  private readonly now: () => number;
  private readonly anomaly: AnomalyRule;
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
    this.anomaly = opts.anomaly ?? DEFAULT_ANOMALY;
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
    await this.opts.lease?.close();
  }

  private async readMonth(orgId: string, at: number): Promise<MonthSpend> {
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
    return { month: m.month, total, customers };
  }

  /** This month's spend of an org (with forecasts' inputs), and its forecast's error on past months (read once a day). */
  private async readOrg(orgId: string, now: number): Promise<SpendSnapshot> {
    const snap = await readSpend(this.spans, orgId, now, 'customer');
    this.spend.set(orgId, snap);
    if (this.history.get(orgId)?.day !== snap.day) {
      const err = backtest(await readHistory(this.spans, orgId, now), snap.day);
      this.history.set(orgId, { day: snap.day, errorPct: err.errorPct, errorMonths: err.months });
    }
    return snap;
  }

  /** Whether this process held the lease at its last check (logged when it changes). */
  private holding: boolean | undefined;

  /** Whether this check records alerts: the one holder of the lease among the replicas. */
  private async alerting(): Promise<boolean> {
    const held = this.opts.lease === undefined || (await this.opts.lease.hold());
    if (held !== this.holding && this.opts.lease !== undefined)
      this.logger.info({ held }, held ? 'budget checks: this replica records alerts' : 'budget checks: another replica records alerts');
    this.holding = held;
    return held;
  }

  private async check(): Promise<void> {
    const alerting = await this.alerting();
    this.budgets = await this.store.list();
    const now = this.now();
    for (const [org, at] of this.asked) if (now - at > 10 * 60_000) this.asked.delete(org);
    for (const org of this.spend.keys())
      if (!this.asked.has(org) && !this.budgets.some((b) => b.orgId === org)) {
        this.spend.delete(org);
        this.models.delete(org);
      }
    const orgs = new Set([...this.budgets.map((b) => b.orgId), ...this.asked.keys()]);
    let recorded = 0;
    for (const orgId of orgs) {
      const current = await this.readOrg(orgId, now);
      const budgets = this.budgets.filter((b) => b.orgId === orgId);
      // Every replica keeps its answers and gauges fresh; one records (and so sends) the alerts.
      if (budgets.length === 0 || !alerting) continue;
      recorded += await this.thresholdAlerts(budgets, monthSpendOf(current));
      recorded += await this.projectedAlerts(budgets, current);
      recorded += await this.anomalyAlerts(budgets, current, now);
      // Late spans of last month count there (its alerts carry its month), for a few days into this one.
      const previous = monthOf(monthOf(now).from - 1);
      if (now - previous.to < 3 * DAY_MS) recorded += await this.thresholdAlerts(budgets, await this.readMonth(orgId, previous.from));
    }
    this.updateGauges();
    if (recorded > 0) this.onAlerts();
  }

  /** Records an alert; true when it is new. */
  private async record(a: NewAlert): Promise<boolean> {
    const fresh = await this.store.record(a);
    if (fresh) {
      this.metrics.budgetAlerts.inc({ kind: a.kind ?? 'threshold' });
      const { orgId: org, customerId: customer, modelId: model, month, threshold, kind = 'threshold' } = a;
      this.logger.info({ org, customer, model, month, threshold, kind }, 'budget alert recorded');
    }
    return fresh;
  }

  /** Records the alerts of thresholds the month's spend has crossed; returns how many are new. */
  private async thresholdAlerts(budgets: readonly BudgetRecord[], m: MonthSpend): Promise<number> {
    let n = 0;
    for (const b of budgets) {
      const amount = parseDecimal(b.monthlyUsd);
      for (const [customer, spent] of subjectsOf(budgets, b, m.total, m.customers, 0n))
        for (const threshold of crossed(spent, amount, b.alertAt)) {
          const alert = {
            budgetId: b.id,
            orgId: b.orgId,
            customerId: customer,
            month: m.month,
            threshold,
            spentUsd: formatDecimal(spent),
            budgetUsd: b.monthlyUsd,
          };
          if (await this.record(alert)) n++;
        }
    }
    return n;
  }

  /** Records, once a month, each budget whose month-end projection exceeds it before its spend does. */
  private async projectedAlerts(budgets: readonly BudgetRecord[], s: SpendSnapshot): Promise<number> {
    let n = 0;
    for (const b of budgets) {
      const amount = parseDecimal(b.monthlyUsd);
      for (const [customer, g] of subjectsOf(budgets, b, s.total, s.groups, undefined)) {
        const f = forecastOf(s, g, amount);
        if (g === undefined || f === null || g.month >= amount || parseDecimal(f.projectedUsd) <= amount) continue;
        const alert: NewAlert = {
          kind: 'projected',
          budgetId: b.id,
          orgId: b.orgId,
          customerId: customer,
          month: s.month,
          threshold: 100,
          spentUsd: formatDecimal(g.month),
          budgetUsd: b.monthlyUsd,
          detail: { projectedUsd: f.projectedUsd, dailyRateUsd: f.dailyRateUsd, crossesOn: f.crossesOn },
        };
        if (await this.record(alert)) n++;
      }
    }
    return n;
  }

  /**
   * Records, once a day, each customer and model whose cost today is far
   * above its own baseline: a customer's through the budget that governs it
   * (else the org's), a model's through the org's budget.
   */
  private async anomalyAlerts(budgets: readonly BudgetRecord[], s: SpendSnapshot, now: number): Promise<number> {
    if (this.anomaly.factor <= 0n) return 0;
    const orgId = budgets[0]?.orgId ?? '';
    const orgBudget = governing(budgets, orgId, '');
    const models = orgBudget === undefined ? undefined : await this.modelSpend(orgId, now, s.total.today);
    const found: { b: BudgetRecord; customer: string; model: string; today: bigint; baseline: bigint }[] = [];
    for (const [customer, g] of s.groups) {
      const a = customer === '' ? undefined : anomalyOf(g.days, g.today, this.anomaly);
      const b = governing(budgets, orgId, customer) ?? orgBudget;
      if (a !== undefined && b !== undefined) found.push({ b, customer, model: '', today: g.today, baseline: a.baseline });
    }
    for (const [model, g] of models?.groups ?? []) {
      const a = model === '' ? undefined : anomalyOf(g.days, g.today, this.anomaly);
      if (a !== undefined && orgBudget !== undefined) found.push({ b: orgBudget, customer: '', model, today: g.today, baseline: a.baseline });
    }
    let n = 0;
    for (const f of found) {
      const alert: NewAlert = {
        kind: 'anomaly',
        budgetId: f.b.id,
        orgId,
        customerId: f.customer,
        modelId: f.model,
        month: s.month,
        day: s.day,
        threshold: Number(this.anomaly.factor),
        spentUsd: formatDecimal(f.today),
        budgetUsd: f.b.monthlyUsd,
        detail: { baselineUsd: formatDecimal(f.baseline), minAboveUsd: formatDecimal(this.anomaly.minUsd) },
      };
      if (await this.record(alert)) n++;
    }
    return n;
  }

  /** An org's spend by model: read again on a new day, or when the org's spend today moved and MODEL_READ_CHECKS checks have passed. */
  private async modelSpend(orgId: string, now: number, today: bigint): Promise<SpendSnapshot> {
    const seen = this.models.get(orgId);
    const fresh = seen !== undefined && seen.snap.day === utcDay(now);
    if (fresh && (seen.snap.total.today === today || performance.now() - seen.at < MODEL_READ_CHECKS * this.opts.checkMs)) return seen.snap;
    const snap = await readSpend(this.spans, orgId, now, 'model');
    this.models.set(orgId, { snap, at: performance.now() });
    return snap;
  }

  private updateGauges(): void {
    this.metrics.budgetSpend.reset();
    this.metrics.budgetAmount.reset();
    this.metrics.budgetProjected.reset();
    const set = (orgId: string, s: SpendSnapshot, customer: string, budget: BudgetRecord | undefined) => {
      const g = customer === '' ? s.total : s.groups.get(customer);
      const labels = { org: orgId, budget: budget?.id ?? '', customer: this.opts.customerLabels === true ? customer : '' };
      this.metrics.budgetSpend.set(labels, Number(formatDecimal(g?.month ?? 0n)));
      if (budget !== undefined) this.metrics.budgetAmount.set(labels, Number(budget.monthlyUsd));
      const f = forecastOf(s, g);
      if (f !== null) this.metrics.budgetProjected.set(labels, Number(f.projectedUsd));
    };
    for (const [orgId, s] of this.spend) {
      set(orgId, s, '', governing(this.budgets, orgId, ''));
      // Per customer only for customers with a budget of their own: label cardinality stays that of the budgets.
      for (const b of this.budgets)
        if (b.orgId === orgId && b.customerId !== '' && b.customerId !== ALL_CUSTOMERS && !this.erased.has(erasedKey(orgId, b.customerId)))
          set(orgId, s, b.customerId, b);
    }
  }

  /**
   * An erased customer leaves the metrics and this process's memory at once,
   * not at the next check, and is not named in the metrics again by this
   * process (a budget left for it included).
   */
  forgetCustomer(orgId: string, customerId: string): void {
    this.erased.add(erasedKey(orgId, customerId));
    this.spend.get(orgId)?.groups.delete(customerId);
    this.updateGauges();
    this.poke();
  }

  private orgStatus(orgId: string, s: SpendSnapshot): OrgBudgetStatus {
    const budget = governing(this.budgets, orgId, '');
    const f = forecastOf(s, s.total, budget === undefined ? undefined : parseDecimal(budget.monthlyUsd));
    const err = this.history.get(orgId);
    const forecast = f === null ? null : { ...f, errorPct: err?.errorPct ?? null, errorMonths: err?.errorMonths ?? 0 };
    return { ...status(s.total.month, budget, null), forecast };
  }

  private customerStatus(orgId: string, s: SpendSnapshot, customer: string): BudgetStatus {
    const budget = governing(this.budgets, orgId, customer);
    const g = s.groups.get(customer);
    return status(g?.month ?? 0n, budget, forecastOf(s, g, budget === undefined ? undefined : parseDecimal(budget.monthlyUsd)));
  }

  /** An org's spend, read now when memory has none for this month. */
  private async spendOf(orgId: string): Promise<SpendSnapshot> {
    const now = this.now();
    this.asked.set(orgId, now);
    const s = this.spend.get(orgId);
    return s !== undefined && s.month === monthOf(now).month ? s : this.readOrg(orgId, now);
  }

  /**
   * The budget of an org (and a customer) for GET /v1/budget, from the last
   * check: a map lookup. An org asked for the first time is read once now.
   */
  async answer(orgId: string, customer: string | undefined): Promise<BudgetAnswer> {
    const s = await this.spendOf(orgId);
    const out: BudgetAnswer = { month: s.month, org: this.orgStatus(orgId, s), asOf: s.readAt };
    if (customer !== undefined) out.customer = { id: customer, ...this.customerStatus(orgId, s, customer) };
    return out;
  }

  /**
   * Budgets, this month's spend and forecasts of an org for the console:
   * the org's, and each customer's by the budget that governs it (null: none).
   */
  async forConsole(orgId: string): Promise<{ budget: OrgBudgetStatus; customers: Record<string, BudgetStatus> }> {
    // A page view reads the budgets as they are now (one small query), not as of the last check.
    this.budgets = await this.store.list();
    const s = await this.spendOf(orgId);
    const customers: Record<string, BudgetStatus> = {};
    for (const c of s.groups.keys()) if (c !== '') customers[c] = this.customerStatus(orgId, s, c);
    for (const b of this.budgets)
      if (b.orgId === orgId && b.customerId !== '' && b.customerId !== ALL_CUSTOMERS) customers[b.customerId] ??= this.customerStatus(orgId, s, b.customerId);
    return { budget: this.orgStatus(orgId, s), customers };
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
      // No webhook (or the budget is gone): the alert is recorded and shown by `budgets events`, never posted.
      await this.store.undeliverable(e.id, this.owner);
      return;
    }
    const body = JSON.stringify(alertBody(e, (await this.opts.orgName(e.orgId)) ?? ''));
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

/**
 * The JSON an alert is posted as: a threshold crossed keeps the shape it has
 * always had; a projection and an anomaly add their own figures.
 */
export function alertBody(e: DueEvent, orgName: string): Record<string, unknown> {
  const common = { id: e.id, org: { id: e.orgId, name: orgName } };
  const at = { month: e.month, createdAt: new Date(e.createdAt).toISOString() };
  const customer = e.customerId === '' ? null : e.customerId;
  if (e.kind === 'projected')
    return {
      ...common,
      type: 'budget.projected_to_exceed',
      customer,
      budgetUsd: e.budgetUsd,
      spentUsd: e.spentUsd,
      projectedUsd: e.detail.projectedUsd ?? null,
      dailyRateUsd: e.detail.dailyRateUsd ?? null,
      crossesOn: e.detail.crossesOn ?? null,
      ...at,
    };
  if (e.kind === 'anomaly')
    return {
      ...common,
      type: 'spend.anomaly',
      customer,
      model: e.modelId === '' ? null : e.modelId,
      day: e.day,
      costUsd: e.spentUsd,
      baselineUsd: e.detail.baselineUsd ?? null,
      factor: e.threshold,
      budgetUsd: e.budgetUsd,
      ...at,
    };
  return { ...common, type: 'budget.threshold_crossed', customer, budgetUsd: e.budgetUsd, spentUsd: e.spentUsd, threshold: e.threshold, ...at };
}
