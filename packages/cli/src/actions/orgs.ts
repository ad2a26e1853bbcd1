import { utcMonth } from '@trace-ingest/shared/ids';
import type { Org } from '@trace-ingest/store/control-store-types';
import type { CliContext } from '../context.js';

export interface OrgListing {
  id: string;
  name: string;
  plan: string;
  monthlySpans: number;
  rateLimitRps: number;
  spansThisMonth: number;
  /** Null: the install's default. */
  retentionDays: number | null;
  textDays: number | null;
  createdAt: string;
}

export async function createOrg(ctx: CliContext, input: { name: string; plan?: string | undefined }): Promise<Org> {
  return (await ctx.keys()).createOrg({ name: input.name, ...(input.plan === undefined ? {} : { planName: input.plan }) });
}

export async function setOrgPlan(ctx: CliContext, org: string, plan: string): Promise<Org> {
  return (await ctx.keys()).setOrgPlan(org, plan);
}

export async function listOrgs(ctx: CliContext, now = Date.now()): Promise<OrgListing[]> {
  const keys = await ctx.keys();
  const plans = new Map((await keys.listPlans()).map((p) => [p.id, p]));
  const month = utcMonth(now);
  const out: OrgListing[] = [];
  for (const o of await keys.listOrgs()) {
    const plan = plans.get(o.planId);
    out.push({
      id: o.id,
      name: o.name,
      plan: o.planName,
      monthlySpans: plan?.monthlySpans ?? 0,
      rateLimitRps: plan?.rateLimitRps ?? 0,
      spansThisMonth: await keys.getMonthUsage(o.id, month),
      retentionDays: o.retentionDays,
      textDays: o.textDays,
      createdAt: new Date(o.createdAt).toISOString(),
    });
  }
  return out;
}
