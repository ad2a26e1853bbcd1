import type { Command } from 'commander';
import { z } from 'zod';
import { auditList, erase, setContentPolicy, setRetention } from '../actions/lifecycle.js';
import { parseOptions } from '../options.js';
import { printJson, printTable } from '../output.js';
import type { Runner } from '../runner.js';

/** A number of days, or "default" for the install's setting. */
const days = z
  .string()
  .regex(/^(\d{1,5}|default)$/, { message: 'give a number of days (0 keeps forever) or "default"' })
  .transform((s) => (s === 'default' ? null : Number(s)))
  .optional();

const collect = (v: string, prev: string[] = []): string[] => [...prev, v];

/** `orgs set-retention`, `orgs set-policy`, `erase` and `audit list`. */
export function registerLifecycle(program: Command, orgs: Command, run: Runner): void {
  orgs
    .command('set-retention <org>')
    .description("how long the org's spans are kept (rows), and their texts; the daily cost rollups are kept past both")
    .option('--days <n>', 'days a span row is kept (0: forever; "default": RETENTION_DAYS)')
    .option('--text-days <n>', 'days a span keeps input, output, tool catalog, sources and safety metadata (0: as long as the row)')
    .option('--json', 'print JSON')
    .action((org: string, raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ org: z.string().min(1), days, textDays: days, json: z.boolean().optional() }), { ...raw, org }, ['org']);
        const r = await setRetention(ctx, o);
        if (o.json === true) printJson(out, { org: r.name, days: r.retentionDays, textDays: r.textDays });
        else {
          const show = (v: number | null, env: string) => (v === null ? `the default (${env})` : v === 0 ? 'forever' : `${v} days`);
          out.out(`org ${r.name}: rows kept ${show(r.retentionDays, 'RETENTION_DAYS')}, texts kept ${show(r.textDays, 'TEXT_RETENTION_DAYS')}`);
        }
      }),
    );
  orgs
    .command('set-policy <org>')
    .description('what the org records: texts or not, and redaction rules applied before anything is written')
    .option('--record <mode>', 'full (texts as sent, after redaction) or no-text (no input, output, tool catalog, sources or safety metadata)')
    .option('--redact <names>', 'built-in rules, comma-separated: email, card, api-key ("" for none)')
    .option('--rule <regex=>replacement>', "a rule of the org's own, e.g. 'order-[0-9]+=>[order]' or '/secret/i=>[x]' (repeat for several)", collect)
    .option('--clear', 'record everything as sent again')
    .option('--json', 'print JSON')
    .addHelpText('after', "\nExample:\n  trace-ingest orgs set-policy acme --redact email,card,api-key --rule 'acct-[0-9]{6,}=>[account]'")
    .action((org: string, raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z.object({
            org: z.string().min(1),
            record: z.enum(['full', 'no-text']).optional(),
            redact: z
              .string()
              .transform((s) => s.split(',').map((x) => x.trim()))
              .optional(),
            rule: z.array(z.string()).optional(),
            clear: z.boolean().optional(),
            json: z.boolean().optional(),
          }),
          { ...raw, org },
          ['org'],
        );
        const r = await setContentPolicy(ctx, { org: o.org, record: o.record, redact: o.redact, rules: o.rule, clear: o.clear });
        if (o.json === true) printJson(out, r);
        else {
          const p = r.policy;
          const rules = [...p.rules, ...p.custom.map((c) => `/${c.pattern}/${c.flags ?? ''} => ${c.replacement}`)];
          out.out(`org ${r.org}: record ${p.record}; redaction: ${rules.length === 0 ? 'none' : rules.join(', ')} (from the next batch on)`);
        }
      }),
    );

  program
    .command('erase')
    .description(
      "erase a customer's, trace's or session's spans from the span store, its rollups and trace table, and a customer's budget and alerts " +
        '(recorded in the audit log)',
    )
    .requiredOption('--org <org>', 'org name or id')
    .option('--customer <id>', 'every span of this customer')
    .option('--trace <id>', 'every span of this trace')
    .option('--session <id>', 'every span of this session')
    .option('--dry-run', 'print what would be removed, remove nothing')
    .option('--json', 'print JSON')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z
            .object({
              org: z.string().min(1),
              customer: z.string().min(1).optional(),
              trace: z.string().min(1).optional(),
              session: z.string().min(1).optional(),
              dryRun: z.boolean().optional(),
              json: z.boolean().optional(),
            })
            .refine((v) => [v.customer, v.trace, v.session].filter((x) => x !== undefined).length === 1, {
              message: 'give exactly one of --customer, --trace or --session',
            }),
          raw,
        );
        const kind = o.customer !== undefined ? 'customer' : o.trace !== undefined ? 'trace' : 'session';
        const id = o.customer ?? o.trace ?? o.session ?? '';
        const r = await erase(ctx, { org: o.org, kind, id, dryRun: o.dryRun === true });
        if (o.json === true) printJson(out, r);
        else {
          const budgets = kind === 'customer' ? `, ${r.controlRows} control-store rows (alerts, its own budget, keys limited to it)` : '';
          const what = `${r.spans} spans in ${r.traces} traces, ${r.rollupRows} rollup rows${budgets} of ${kind} ${id} (org ${r.org})`;
          out.out(r.dryRun ? `would erase ${what}; run again without --dry-run to erase` : `erased ${what}; recorded in the audit log`);
        }
      }),
    );

  program
    .command('audit')
    .description('the audit log: erasures and retention or content-policy changes (who, when, what; never the data)')
    .command('list')
    .description('newest first')
    .option('--org <org>', 'only this org')
    .option('--limit <n>', 'at most this many entries', '100')
    .option('--json', 'print JSON')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ org: z.string().optional(), limit: z.coerce.number().int().min(1).max(10_000), json: z.boolean().optional() }), raw);
        const rows = await auditList(ctx, o);
        if (o.json === true) printJson(out, rows);
        else printTable(out, rows, ['at', 'actor', 'action', 'org', 'target', 'detail']);
      }),
    );
}
