import type { Plan } from '@trace-ingest/store/control-store-types';
import type { CliContext } from '../context.js';

export async function createPlan(ctx: CliContext, input: { name: string; monthlySpans: number; rateLimitRps: number }): Promise<Plan> {
  return (await ctx.keys()).createPlan(input);
}

export async function updatePlan(
  ctx: CliContext,
  name: string,
  patch: { monthlySpans?: number | undefined; rateLimitRps?: number | undefined },
): Promise<Plan> {
  const clean: { monthlySpans?: number; rateLimitRps?: number } = {};
  if (patch.monthlySpans !== undefined) clean.monthlySpans = patch.monthlySpans;
  if (patch.rateLimitRps !== undefined) clean.rateLimitRps = patch.rateLimitRps;
  return (await ctx.keys()).updatePlan(name, clean);
}

export async function listPlans(ctx: CliContext): Promise<Plan[]> {
  return (await ctx.keys()).listPlans();
}
