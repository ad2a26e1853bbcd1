import { UsageError } from '@trace-ingest/shared/errors';
import {
  ALL_CUSTOMERS,
  DEFAULT_ALERT_AT,
  openBudgets,
  parseAlertAt,
  type AlertKind,
  type BudgetEvent,
  type BudgetRecord,
  type Budgets,
} from '@trace-ingest/store/budgets';
import { secretBoxFor } from '@trace-ingest/store/secret-box';
import type { CliContext } from '../context.js';

export interface BudgetListing {
  org: string;
  /** '(org)' for the org's own budget, '*' for every customer, else the customer's id. */
  scope: string;
  monthlyUsd: string;
  alertAt: string;
  webhook: string;
}

export interface BudgetEventListing {
  id: string;
  org: string;
  /** threshold (crossed), projected (to exceed the budget this month), anomaly (a day's spend far above its baseline). */
  kind: AlertKind;
  customer: string;
  /** The model of a model's anomaly ('' otherwise). */
  model: string;
  month: string;
  /** The day of an anomaly ('' otherwise). */
  day: string;
  threshold: number;
  spentUsd: string;
  budgetUsd: string;
  /** A projection's projectedUsd and crossesOn, an anomaly's baselineUsd. */
  detail: Record<string, string | null>;
  createdAt: string;
  /** When a POST was answered 2xx; '' without a webhook; pending (none yet) or retrying (POSTs failed). */
  delivered: string;
  /** POSTs made. */
  attempts: number;
  lastError: string;
}

/** The key store is opened first: its migrations create the budgets' tables. */
export async function withBudgets<T>(ctx: CliContext, fn: (b: Budgets) => Promise<T>): Promise<T> {
  await ctx.keys();
  const budgets = await openBudgets({ sqliteFile: ctx.config.sqliteFile, databaseUrl: ctx.config.DATABASE_URL, secrets: secretBoxFor(ctx.config) });
  await budgets.start();
  try {
    return await fn(budgets);
  } finally {
    await budgets.close();
  }
}

async function orgOf(ctx: CliContext, org: string): Promise<{ id: string; name: string }> {
  const o = await (await ctx.keys()).getOrg(org);
  if (o === null) throw new UsageError(`unknown org "${org}"; see "trace-ingest orgs list"`);
  return o;
}

function scopeOf(input: { customer?: string | undefined; allCustomers?: boolean | undefined }): string {
  if (input.customer !== undefined && input.allCustomers === true) throw new UsageError('give --customer <id> or --all-customers, not both');
  if (input.customer !== undefined && (input.customer === '' || input.customer === ALL_CUSTOMERS))
    throw new UsageError('--customer: give a customer id (for every customer, --all-customers)');
  return input.allCustomers === true ? ALL_CUSTOMERS : (input.customer ?? '');
}

const scopeText = (customerId: string): string => (customerId === '' ? '(org)' : customerId);

async function listing(ctx: CliContext, b: BudgetRecord): Promise<BudgetListing> {
  const org = (await (await ctx.keys()).getOrg(b.orgId))?.name ?? b.orgId;
  return { org, scope: scopeText(b.customerId), monthlyUsd: b.monthlyUsd, alertAt: b.alertAt.join(','), webhook: b.webhookUrl ?? '' };
}

export async function setBudget(
  ctx: CliContext,
  input: {
    org: string;
    customer?: string | undefined;
    allCustomers?: boolean | undefined;
    monthlyUsd: string;
    alertAt?: string | undefined;
    webhook?: string | undefined;
  },
): Promise<{ budget: BudgetListing; secret?: string }> {
  const org = await orgOf(ctx, input.org);
  const customerId = scopeOf(input);
  const alertAt = input.alertAt === undefined ? [...DEFAULT_ALERT_AT] : parseAlertAt(input.alertAt);
  const r = await withBudgets(ctx, (b) => b.set({ orgId: org.id, customerId, monthlyUsd: input.monthlyUsd, alertAt, webhookUrl: input.webhook ?? null }));
  return { budget: await listing(ctx, r.budget), ...(r.secret === undefined ? {} : { secret: r.secret }) };
}

/** Hours a rotated secret keeps signing beside the new one, by default: a day for the receiver to switch. */
export const DEFAULT_ROTATION_OVERLAP_HOURS = 24;

/**
 * A new signing secret for a budget's webhook, printed once; the old one
 * signs alongside it for `overlapHours` (0: at once only the new one).
 */
export async function rotateSecret(
  ctx: CliContext,
  input: { org: string; customer?: string | undefined; allCustomers?: boolean | undefined; overlapHours?: number | undefined },
): Promise<{ budget: BudgetListing; secret: string; oldSecretUntil: string | null }> {
  const org = await orgOf(ctx, input.org);
  const customerId = scopeOf(input);
  const hours = input.overlapHours ?? DEFAULT_ROTATION_OVERLAP_HOURS;
  const started = Date.now();
  const secret = await withBudgets(ctx, (b) => b.rotateSecret(org.id, customerId, hours * 3_600_000));
  const [budget] = (await listBudgets(ctx, { org: org.id })).filter((l) => l.scope === scopeText(customerId));
  if (budget === undefined) throw new UsageError('the budget was removed meanwhile');
  return { budget, secret, oldSecretUntil: hours > 0 ? new Date(started + hours * 3_600_000).toISOString() : null };
}

/** Seals the webhook secrets stored in plain text (by an earlier version) or under an older SECRETS_KEY; how many. */
export function sealSecrets(ctx: CliContext): Promise<number> {
  return withBudgets(ctx, (b) => b.sealSecrets());
}

export async function listBudgets(ctx: CliContext, input: { org?: string | undefined }): Promise<BudgetListing[]> {
  const orgId = input.org === undefined ? undefined : (await orgOf(ctx, input.org)).id;
  const all = await withBudgets(ctx, (b) => b.list(orgId));
  return Promise.all(all.map((b) => listing(ctx, b)));
}

export async function unsetBudget(
  ctx: CliContext,
  input: { org: string; customer?: string | undefined; allCustomers?: boolean | undefined },
): Promise<boolean> {
  const org = await orgOf(ctx, input.org);
  const customerId = scopeOf(input);
  return withBudgets(ctx, (b) => b.unset(org.id, customerId));
}

export async function budgetEvents(ctx: CliContext, input: { org?: string | undefined; limit?: number | undefined }): Promise<BudgetEventListing[]> {
  const orgId = input.org === undefined ? undefined : (await orgOf(ctx, input.org)).id;
  const events = await withBudgets(ctx, (b) => b.events({ orgId, limit: input.limit ?? 100 }));
  const keys = await ctx.keys();
  const names = new Map<string, string>();
  const out: BudgetEventListing[] = [];
  for (const e of events as BudgetEvent[]) {
    if (!names.has(e.orgId)) names.set(e.orgId, (await keys.getOrg(e.orgId))?.name ?? e.orgId);
    out.push({
      id: e.id,
      org: names.get(e.orgId) ?? e.orgId,
      kind: e.kind,
      customer: e.kind === 'anomaly' && e.customerId === '' ? '' : scopeText(e.customerId),
      model: e.modelId,
      month: e.month,
      day: e.day,
      threshold: e.threshold,
      spentUsd: e.spentUsd,
      budgetUsd: e.budgetUsd,
      detail: e.detail,
      createdAt: new Date(e.createdAt).toISOString(),
      delivered: deliveredText(e),
      attempts: e.attempts,
      lastError: e.lastError ?? '',
    });
  }
  return out;
}

function deliveredText(e: BudgetEvent): string {
  if (e.delivery === 'none') return '';
  if (e.delivery === 'delivered' && e.deliveredAt !== null) return new Date(e.deliveredAt).toISOString();
  return e.attempts === 0 ? 'pending' : 'retrying';
}
