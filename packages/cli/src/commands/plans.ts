import type { Command } from 'commander';
import { z } from 'zod';
import { createPlan, listPlans, updatePlan } from '../actions/plans.js';
import type { Runner } from '../runner.js';
import { name, nonNegativeInt, parseOptions, positiveInt } from '../options.js';
import { printJson, printTable } from '../output.js';

export function registerPlans(program: Command, run: Runner): void {
  const plans = program.command('plans').description('monthly span quotas and per-key rate limits');
  plans
    .command('create <name>')
    .description('create a plan')
    .requiredOption('--monthly-spans <n>', 'spans an org may send per UTC calendar month')
    .requiredOption('--rate-limit <rps>', 'requests per second per API key')
    .option('--json', 'print JSON')
    .action((planName: string, raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ name, monthlySpans: nonNegativeInt, rateLimit: positiveInt, json: z.boolean().optional() }), {
          ...raw,
          name: planName,
        });
        const p = await createPlan(ctx, { name: o.name, monthlySpans: o.monthlySpans, rateLimitRps: o.rateLimit });
        if (o.json) printJson(out, p);
        else out.out(`created plan ${p.name}: ${p.monthlySpans} spans/month, ${p.rateLimitRps} requests/s per key`);
      }),
    );
  plans
    .command('update <name>')
    .description('change a plan; running servers apply it on the next request')
    .option('--monthly-spans <n>', 'spans an org may send per UTC calendar month')
    .option('--rate-limit <rps>', 'requests per second per API key')
    .option('--json', 'print JSON')
    .action((planName: string, raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z
            .object({ monthlySpans: nonNegativeInt.optional(), rateLimit: positiveInt.optional(), json: z.boolean().optional() })
            .refine((v) => v.monthlySpans !== undefined || v.rateLimit !== undefined, { message: 'give --monthly-spans and/or --rate-limit' }),
          raw,
        );
        const p = await updatePlan(ctx, planName, { monthlySpans: o.monthlySpans, rateLimitRps: o.rateLimit });
        if (o.json) printJson(out, p);
        else out.out(`updated plan ${p.name}: ${p.monthlySpans} spans/month, ${p.rateLimitRps} requests/s per key`);
      }),
    );
  plans
    .command('list')
    .description('list plans')
    .option('--json', 'print JSON')
    .action((raw: { json?: boolean }) =>
      run(async (ctx, out) => {
        const list = await listPlans(ctx);
        if (raw.json === true) printJson(out, list);
        else printTable(out, list, ['name', 'monthlySpans', 'rateLimitRps']);
      }),
    );
}
