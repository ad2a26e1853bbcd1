import type { Command } from 'commander';
import { auditCatalog, importCatalog, listCatalogs, useCatalog } from '../actions/catalog.js';
import { listPrices, setPrice, showPrice, unpricedModels, unsetPrice } from '../actions/prices.js';
import type { Runner } from '../runner.js';
import { printJson, printTable } from '../output.js';

export function registerPrices(program: Command, run: Runner): void {
  const prices = program.command('prices').description('price overrides (USD) that win over the catalog; changes apply to the next request');
  prices
    .command('set <model>')
    .description('set unit prices for a model: per 1M tokens, or per unit for images, web searches and requests')
    .option('--provider <provider>', 'only for this provider (default: any)')
    .option('--org <org>', 'only for this org (default: every org)')
    .option('--from <date>', 'in force from this date (YYYY-MM-DD UTC or ISO timestamp; default: always)')
    .requiredOption('--input <usd>', 'USD per 1M uncached input tokens')
    .requiredOption('--output <usd>', 'USD per 1M output tokens')
    .option('--cached-input <usd>', 'USD per 1M cache-read tokens (default: the input price)')
    .option('--cache-write <usd>', 'USD per 1M cache-write tokens (default: the input price)')
    .option('--reasoning <usd>', 'USD per 1M reasoning tokens (default: the output price)')
    .option('--image <usd>', 'USD per image')
    .option('--web-search <usd>', 'USD per web search')
    .option('--request <usd>', 'USD per request')
    .option('--json', 'print JSON')
    .action((model: string, o: Record<string, string | undefined> & { json?: boolean }) =>
      run(async (ctx, out) => {
        const r = await setPrice(ctx, {
          model,
          provider: o.provider,
          org: o.org,
          from: o.from,
          input: o.input ?? '',
          output: o.output ?? '',
          cachedInput: o.cachedInput,
          cacheWrite: o.cacheWrite,
          reasoning: o.reasoning,
          image: o.image,
          webSearch: o.webSearch,
          request: o.request,
        });
        if (o.json === true) printJson(out, r);
        else
          out.out(
            `price set for ${r.model} (provider ${r.provider}, org ${r.org}, from ${r.from}): ` +
              `input ${r.inputPerMtok}, output ${r.outputPerMtok} USD per 1M tokens`,
          );
      }),
    );
  prices
    .command('show <model>')
    .description('show the unit prices that would apply, and where they come from')
    .option('--provider <provider>', 'provider as spans send it')
    .option('--org <org>', 'as seen by this org')
    .option('--at <date>', 'at this time (default: now)')
    .option('--tier <tier>', 'in this service tier, as spans report it (flex, priority, batch, ...; default: standard)')
    .option('--region <region>', 'in this region, as spans report it (us, eu, a Vertex AI location, ...; default: the standard price)')
    .option('--json', 'print JSON')
    .action((model: string, o: { provider?: string; org?: string; at?: string; tier?: string; region?: string; json?: boolean }) =>
      run(async (ctx, out) => {
        const q = await showPrice(ctx, { model, provider: o.provider, org: o.org, at: o.at, tier: o.tier, region: o.region });
        if (o.json === true) {
          printJson(out, q);
          return;
        }
        const variant = [q.serviceTier === '' ? '' : ` tier ${q.serviceTier}`, q.region === '' ? '' : ` region ${q.region}`].join('');
        out.out(
          `${q.provider}/${q.model}${variant} at ${q.at} from ${q.source}` +
            `${q.tiers.length > 0 ? ` (long-context tiers above ${q.tiers.join(', ')} input tokens)` : ''}`,
        );
        const fb = (k: string) => (q.fallbacks[k] === undefined ? '' : `  (no own price: ${q.fallbacks[k]} price)`);
        out.out(`  input          ${q.inputPerMtok} USD / 1M tokens`);
        out.out(`  cached input   ${q.cachedInputPerMtok} USD / 1M tokens${fb('cachedInput')}`);
        out.out(`  cache write    ${q.cacheWriteInputPerMtok} USD / 1M tokens${fb('cacheWriteInput')}`);
        out.out(`  output         ${q.outputPerMtok} USD / 1M tokens`);
        out.out(`  reasoning      ${q.reasoningPerMtok} USD / 1M tokens${fb('reasoning')}`);
        const own = (v: string | null, k: string) => (v === null ? 'none (a span with these tokens is left unpriced)' : `${v} USD / 1M tokens${fb(k)}`);
        out.out(`  cache write 1h ${own(q.cacheWrite1hInputPerMtok, 'cacheWrite1hInput')}`);
        out.out(`  audio input    ${own(q.audioInputPerMtok, 'audioInput')}`);
        out.out(`  cached audio   ${own(q.cachedAudioInputPerMtok, 'cachedAudioInput')}`);
        out.out(`  audio output   ${own(q.audioOutputPerMtok, 'audioOutput')}`);
        out.out(`  image          ${q.imageEach} USD each`);
        out.out(`  web search     ${q.webSearchEach} USD each`);
        out.out(`  request        ${q.requestEach} USD each`);
      }),
    );
  prices
    .command('list')
    .description('list price overrides')
    .option('--json', 'print JSON')
    .action((o: { json?: boolean }) =>
      run(async (ctx, out) => {
        const list = await listPrices(ctx);
        if (o.json === true) printJson(out, list);
        else
          printTable(out, list, [
            'model',
            'provider',
            'org',
            'from',
            'inputPerMtok',
            'outputPerMtok',
            'cachedInputPerMtok',
            'cacheWriteInputPerMtok',
            'reasoningPerMtok',
          ]);
      }),
    );
  prices
    .command('unset <model>')
    .description('remove price overrides of a model')
    .option('--provider <provider>', 'the override of this provider (default: the one for any provider)')
    .option('--org <org>', "this org's override (default: the global one)")
    .option('--from <date>', 'only the override starting at this date (default: all)')
    .action((model: string, o: { provider?: string; org?: string; from?: string }) =>
      run(async (ctx, out) => {
        const n = await unsetPrice(ctx, { model, provider: o.provider, org: o.org, from: o.from });
        out.out(`removed ${n} price override(s) for ${model}`);
      }),
    );
  prices
    .command('unpriced')
    .description('models (and service tiers and regions of them) seen in spans without a price, with span counts and what has no price')
    .option('--json', 'print JSON')
    .action((o: { json?: boolean }) =>
      run(async (ctx, out) => {
        const list = await unpricedModels(ctx);
        if (o.json === true) printJson(out, list);
        else printTable(out, list, ['provider', 'model', 'serviceTier', 'region', 'spans', 'why', 'firstSeen', 'lastSeen']);
      }),
    );
  prices
    .command('import <file>')
    .description(
      'take a newer genai-prices catalog file (data.json) on a running install: validated, kept with every earlier one, in force on the next request',
    )
    .option('--source <name>', "the catalog's name in price_source (default: the file's name)")
    .option('--date <YYYY-MM-DD>', "the day the catalog describes (default: the file's modification day)")
    .option('--dry-run', 'show what would change (models added, prices changed, with their dates); change nothing')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExample (air-gapped: carry the file in):\n  trace-ingest prices import ./data.json --source genai-prices-main --date 2026-11-20 --dry-run',
    )
    .action((file: string, o: { source?: string; date?: string; dryRun?: boolean; json?: boolean }) =>
      run(async (ctx, out) => {
        const r = await importCatalog(ctx, { file, source: o.source, date: o.date, dryRun: o.dryRun === true });
        if (o.json === true) {
          printJson(out, r);
          return;
        }
        for (const c of r.changes) {
          const dates = c.from.length === 0 ? '' : ` (prices from ${c.from.join(', ')})`;
          out.out(`${c.kind.padEnd(8)} ${c.provider}/${c.model}${dates}${c.kind === 'changed' ? `: ${c.before} -> ${c.after}` : ''}`);
        }
        const undated = r.dated.length === 0 ? '' : ` (${r.dated.length} undated changes hold from the catalog's date, older spans keep their price)`;
        const summary = `${r.added} models added, ${r.changed} changed${undated}, ${r.removed} removed, against ${r.replaces}`;
        if (r.dryRun) out.out(`${r.catalog} would replace the catalog in force: ${summary}; nothing changed (run again without --dry-run)`);
        else out.out(`${r.catalog} is in force from the next request of every replica${r.created ? '' : ' (imported before)'}: ${summary}`);
      }),
    );
  prices
    .command('catalogs')
    .description("the release's catalog and every imported one; the one in force is marked")
    .option('--json', 'print JSON')
    .action((o: { json?: boolean }) =>
      run(async (ctx, out) => {
        const list = await listCatalogs(ctx);
        if (o.json === true) printJson(out, list);
        else printTable(out, list, ['id', 'catalog', 'inForce', 'importedAt', 'importedBy']);
      }),
    );
  prices
    .command('use <catalog>')
    .description('put an imported catalog (id or sha256 prefix) in force again, or "release" for the one the release ships')
    .action((which: string) =>
      run(async (ctx, out) => {
        out.out(`${await useCatalog(ctx, which)} is in force from the next request; "trace-ingest reprice" moves stored spans to it`);
      }),
    );
  prices
    .command('audit')
    .description("compare the prices in force with a second maintained catalog (LiteLLM's price map, shipped with the release), and adopt its price")
    .option('--seen', 'only models with stored spans')
    .option('--adopt <models...>', "adopt the second catalog's price for these flagged models (in force on the next request)")
    .option('--from <date>', "the day the adopted price holds from, as the provider's page dates it (default: the second catalog's snapshot date)")
    .option('--all', 'adopt for every flagged model')
    .option('--unadopt <models...>', 'withdraw adopted prices (the release adoptions too)')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExamples:\n  trace-ingest prices audit --seen\n  trace-ingest prices audit --adopt deepseek-reasoner deepseek-chat')
    .action((o: { seen?: boolean; adopt?: string[]; all?: boolean; unadopt?: string[]; from?: string; json?: boolean }) =>
      run(async (ctx, out) => {
        const r = await auditCatalog(ctx, { seen: o.seen, adopt: o.adopt, all: o.all, unadopt: o.unadopt, from: o.from });
        if (o.json === true) {
          printJson(out, r);
          return;
        }
        for (const f of r.findings) {
          out.out(`${f.provider}/${f.model} [${f.status}] (in force: ${f.source ?? 'no price'})`);
          f.diffs.forEach((d, i) => {
            const what = `${d.variant === undefined ? '' : `${d.variant} `}${d.bucket}${d.tier === 'base' ? '' : ` ${d.tier}`}`;
            // Every source that states this price, newest first, the one in force marked.
            const sources = (f.diffSources[i] ?? [])
              .map((s) => `${s.inForce ? '*' : ''}${s.source} (${s.from === '' ? `as of ${s.asOf}` : `from ${s.from}`}): ${s.price ?? 'none'}`)
              .join('; ');
            out.out(`  ${what}: ${d.inForce ?? 'none'} vs ${d.second}  [${sources}]`);
          });
        }
        for (const m of r.unadopted) out.out(`withdrew the adopted price of ${m}`);
        for (const a of r.adopted) out.out(`adopted ${a.provider}/${a.model} from ${a.from} (${a.source})`);
        out.out(
          `${r.differs} models priced differently and ${r.unknown} unknown to the catalog, by ${r.second} ` +
            `against ${r.catalog} at ${r.at} (USD per 1M tokens: in force vs second catalog)`,
        );
      }),
    );
}
