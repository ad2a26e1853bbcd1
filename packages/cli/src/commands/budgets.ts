import type { Command } from 'commander';
import { z } from 'zod';
import { budgetEvents, DEFAULT_ROTATION_OVERLAP_HOURS, listBudgets, rotateSecret, setBudget, unsetBudget } from '../actions/budgets.js';
import { parseOptions } from '../options.js';
import { printJson, printTable } from '../output.js';
import type { Runner } from '../runner.js';

const Scope = { customer: z.string().optional(), allCustomers: z.boolean().optional() };

export function registerBudgets(program: Command, run: Runner): void {
  const b = program
    .command('budgets')
    .description('monthly spend budgets per org or customer, and their alerts (webhooks signed with HMAC-SHA256 over a timestamp and the body)')
    .addHelpText(
      'after',
      '\nExamples:\n' +
        '  trace-ingest budgets set --org acme --monthly-usd 500 --webhook https://hooks.example.com/ti\n' +
        '  trace-ingest budgets set --org acme --all-customers --monthly-usd 20 --alert-at 80,100\n' +
        '  trace-ingest budgets events --org acme',
    );
  b.command('set')
    .description("set a budget for the UTC month: the org's (default), one customer's, or each customer's")
    .requiredOption('--org <org>', 'org name or id')
    .option('--customer <id>', 'a budget for this customer')
    .option('--all-customers', 'the same budget for each customer')
    .requiredOption('--monthly-usd <amount>', 'the budget in USD, exact decimal (e.g. 250 or 19.99)')
    .option('--alert-at <percents>', 'alert when spend reaches these percentages of the budget', '50,80,100')
    .option('--webhook <url>', 'POST each alert here (JSON, signed; the secret is printed once)')
    .option('--json', 'print JSON')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z.object({
            org: z.string().min(1),
            ...Scope,
            monthlyUsd: z.string().min(1),
            alertAt: z.string().min(1),
            webhook: z.string().min(1).optional(),
            json: z.boolean().optional(),
          }),
          raw,
        );
        const r = await setBudget(ctx, o);
        if (o.json === true) printJson(out, r);
        else {
          out.out(`budget set: ${r.budget.org} ${r.budget.scope} $${r.budget.monthlyUsd} a month, alerts at ${r.budget.alertAt}%`);
          if (r.secret !== undefined) {
            out.out(r.secret);
            out.err(
              'the webhook secret above signs each alert (X-Trace-Ingest-Signature: t=<unix seconds>,v1=<HMAC-SHA256 of "<t>.<body>">, ' +
                'see the README); store it now: it is not shown again',
            );
          }
        }
      }),
    );
  b.command('rotate-secret')
    .description("give a budget's webhook a new signing secret (printed once); the old one keeps signing beside it for --overlap-hours")
    .requiredOption('--org <org>', 'org name or id')
    .option('--customer <id>', "the customer's budget")
    .option('--all-customers', 'the budget of each customer')
    .option(
      '--overlap-hours <n>',
      'hours the old secret still signs (a second v1= in the header), for the receiver to switch',
      String(DEFAULT_ROTATION_OVERLAP_HOURS),
    )
    .option('--json', 'print JSON')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z.object({
            org: z.string().min(1),
            ...Scope,
            overlapHours: z.coerce
              .number()
              .int()
              .min(0)
              .max(24 * 30),
            json: z.boolean().optional(),
          }),
          raw,
        );
        const r = await rotateSecret(ctx, o);
        if (o.json === true) printJson(out, r);
        else {
          out.out(r.secret);
          out.err(
            `new webhook secret for ${r.budget.org} ${r.budget.scope}; store it now: it is not shown again. ` +
              (r.oldSecretUntil === null ? 'The old secret signs no more.' : `The old secret also signs until ${r.oldSecretUntil}.`),
          );
        }
      }),
    );
  b.command('list')
    .description('list budgets')
    .option('--org <org>', 'only this org')
    .option('--json', 'print JSON')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ org: z.string().min(1).optional(), json: z.boolean().optional() }), raw);
        const rows = await listBudgets(ctx, o);
        if (o.json === true) printJson(out, rows);
        else if (rows.length === 0) out.out('no budgets; set one with "trace-ingest budgets set --org <org> --monthly-usd <amount>"');
        else printTable(out, rows, ['org', 'scope', 'monthlyUsd', 'alertAt', 'webhook']);
      }),
    );
  b.command('unset')
    .description("remove a budget (the org's, --customer's or --all-customers'); its past alerts stay")
    .requiredOption('--org <org>', 'org name or id')
    .option('--customer <id>', "the customer's budget")
    .option('--all-customers', 'the budget of each customer')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ org: z.string().min(1), ...Scope }), raw);
        out.out((await unsetBudget(ctx, o)) ? 'budget removed' : 'no such budget (nothing changed)');
      }),
    );
  b.command('events')
    .description('alerts recorded (thresholds crossed, projected to exceed, spend anomalies), newest first, and whether their webhook got them')
    .option('--org <org>', 'only this org')
    .option('--limit <n>', 'at most n alerts', '100')
    .option('--json', 'print JSON')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z.object({ org: z.string().min(1).optional(), limit: z.coerce.number().int().min(1).max(10_000), json: z.boolean().optional() }),
          raw,
        );
        const rows = await budgetEvents(ctx, o);
        if (o.json === true) printJson(out, rows);
        else if (rows.length === 0) out.out('no alerts yet');
        else
          printTable(
            out,
            rows.map((r) => ({ ...r, subject: r.model === '' ? r.customer : `model ${r.model}`, when: r.day === '' ? r.month : r.day })),
            ['createdAt', 'org', 'kind', 'subject', 'when', 'threshold', 'spentUsd', 'budgetUsd', 'delivered', 'attempts', 'id'],
          );
      }),
    );
}
