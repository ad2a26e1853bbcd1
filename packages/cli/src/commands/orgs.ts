import type { Command } from 'commander';
import { z } from 'zod';
import { createOrg, listOrgs, setOrgPlan } from '../actions/orgs.js';
import type { Runner } from '../runner.js';
import { name, parseOptions } from '../options.js';
import { printJson, printTable } from '../output.js';

export function registerOrgs(program: Command, run: Runner): Command {
  const orgs = program.command('orgs').description('organizations (the unit of quota and billing)');
  orgs
    .command('create <name>')
    .description('create an org')
    .option('--plan <plan>', 'plan name (default: "default")')
    .option('--json', 'print JSON')
    .action((orgName: string, raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ name, plan: name.optional(), json: z.boolean().optional() }), { ...raw, name: orgName }, ['name']);
        const org = await createOrg(ctx, { name: o.name, plan: o.plan });
        if (o.json) printJson(out, org);
        else out.out(`created org ${org.name} on plan ${org.planName}; next: trace-ingest keys create --org ${org.name}`);
      }),
    );
  orgs
    .command('set-plan <org> <plan>')
    .description('move an org to another plan; applies to the running server at once')
    .option('--json', 'print JSON')
    .action((org: string, plan: string, raw: { json?: boolean }) =>
      run(async (ctx, out) => {
        const r = await setOrgPlan(ctx, org, plan);
        if (raw.json === true) printJson(out, r);
        else out.out(`org ${r.name} is now on plan ${r.planName}`);
      }),
    );
  orgs
    .command('list')
    .description('list orgs with their plan and usage this month')
    .option('--json', 'print JSON')
    .action((raw: { json?: boolean }) =>
      run(async (ctx, out) => {
        const list = await listOrgs(ctx);
        if (raw.json === true) printJson(out, list);
        else {
          printTable(out, list, ['name', 'plan', 'monthlySpans', 'spansThisMonth', 'rateLimitRps', 'createdAt']);
          // The two months an operator compares: a span started on 30 November and received on 1 December counts
          // against December's quota and appears in November's usage.
          out.out('spansThisMonth: spans received this UTC month, as the quota counts them; `usage` counts spans by their start time');
        }
      }),
    );
  return orgs;
}
