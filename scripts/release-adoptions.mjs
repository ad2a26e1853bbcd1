// Writes catalog/adoptions.json: the dated prices this release puts on top of the catalog, all of them
// data (never typed by hand into the engine), each with its source and the day it holds from:
//  1. the second catalog's prices for models the catalog prices wrong, each checked against the
//     provider's page, from the day the provider's price took effect (ADOPT);
//  2. rules of every model of a provider, from its pricing page: Batch APIs at half price, Anthropic's
//     US-only inference at 1.1x from Opus 4.6 on, Vertex AI's regional endpoints at 1.1x for Claude from
//     4.5 on (RULES);
//  3. the second catalog's one-hour cache, audio, service-tier and region prices of every model it
//     knows, where the catalog has none (the catalog's own audio prices stand where it has them).
// Run after updating either catalog:
//   npx tsc -b && node scripts/release-adoptions.mjs
import fs from 'node:fs';
import { PriceEngine } from '../packages/shared/dist/price-engine.js';
import { adoptionFor, auditPrices, bundledSecondCatalog, entryTarget, secondCatalogTag } from '../packages/shared/dist/price-audit.js';

/**
 * provider/model as the audit names them: the day the price holds from and why the second catalog's
 * price is the right one. Not adopted although flagged: aws/anthropic.claude-sonnet-4-5-20250929-v1:0
 * (the second catalog gives the in-region id the global endpoint's $3, where it is billed at the
 * regional $3.30: the regional adoption above prices it).
 */
const ADOPT = {
  'deepseek/deepseek-reasoner': [
    '2025-09-05',
    'DeepSeek V3.2 prices since 2025-09-05: $0.28 input (cache miss), $0.028 cache hit, $0.42 output (api-docs.deepseek.com/quick_start/pricing)',
  ],
  'deepseek/deepseek-chat': ['2025-09-05', 'same page and prices as deepseek-reasoner; the catalog still has the off-peak prices that ended 2025-09-05'],
  'mistral/mistral-large-latest': [
    '2025-12-02',
    'mistral-large-latest names Mistral Large 3 (2512) since its release on 2025-12-02: $0.5 input, $1.5 output ' +
      '(docs.mistral.ai/models/mistral-large-3-25-12); before that day it named Large 2411 at $2 / $6, the catalog price',
  ],
  'anthropic/claude-sonnet-4-20250514': [
    '2025-08-12',
    'long context (1M, from its launch on 2025-08-12): above 200k input tokens $6 input, $22.50 output, $0.60 cache read, ' +
      '$7.50 cache write (docs.claude.com pricing, long context); the catalog keeps its one-hour cache write and web search prices',
  ],
  'aws/us.anthropic.claude-sonnet-4-5-20250929-v1:0': [
    '2025-09-29',
    'Bedrock Claude Sonnet 4.5 from its launch, regional and geographic ids (us., eu., au., jp., and the in-region id): $3.30 / $16.50, ' +
      'above 200k input tokens $6.60 / $24.75 (aws.amazon.com/bedrock/pricing)',
  ],
  'aws/global.anthropic.claude-sonnet-4-5-20250929-v1:0': [
    '2025-09-29',
    'Bedrock Claude Sonnet 4.5 from its launch, global endpoint: $3 / $15, above 200k input tokens $6 / $22.50 (same page)',
  ],
  'aws/us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0': [
    '2025-09-29',
    'Bedrock Claude Sonnet 4.5 in AWS GovCloud (us-gov.): $3.60 / $18, above 200k input tokens $7.20 / $27 (aws.amazon.com/bedrock/pricing, ' +
      "GovCloud regions); the catalog gives it the commercial regions' $3.30",
    { contains: 'us-gov.anthropic.claude-sonnet-4-5' },
  ],
  'aws/us.anthropic.claude-sonnet-4-20250514-v1:0': [
    '2025-08-12',
    'Bedrock Claude Sonnet 4, every regional and geographic id, long context: above 200k input tokens $6 / $22.50, $0.60 cache read, ' +
      '$7.50 cache write (aws.amazon.com/bedrock/pricing), as on the Anthropic API for the same model',
  ],
  'aws/global.anthropic.claude-sonnet-4-20250514-v1:0': ['2025-08-12', 'Bedrock Claude Sonnet 4, global endpoint, long context: the same prices (same page)'],
  'google-vertex/claude-sonnet-4': [
    '2025-08-12',
    'Claude Sonnet 4 on Vertex AI, every id (claude-sonnet-4@20250514, ...), long context: above 200k input tokens $6 / $22.50 ' +
      '(cloud.google.com/vertex-ai/generative-ai/pricing#claude-models), as on the Anthropic API',
  ],
  'mistral/mistral-small-latest': [
    '2026-05-28',
    'mistral-small-latest is Mistral Small 3.2 (2506), $0.06 input, $0.18 output on mistral.ai/pricing (as synced by ' +
      'llmpricing.site on 2026-05-28, the earliest dated source of it, and as the second catalog prices mistral-small-3-2-2506); ' +
      'the catalog still has its launch $0.1 / $0.3',
  ],
  'x-ai/grok-4-0709': [
    '2025-07-09',
    'grok-4 (grok-4-0709) from its launch: above 128k context $6 input, $30 output; $3 / $15 below (docs.x.ai/docs/models); ' +
      'the catalog keeps its $0.75 cached input',
  ],
  'google-vertex/gemini-2.0-flash-001': [
    '2025-02-05',
    'Vertex AI bills Gemini 2.0 Flash at $0.15 input, $0.60 output since its GA on 2025-02-05, unlike the Gemini API ' +
      '(cloud.google.com/vertex-ai/generative-ai/pricing)',
  ],
};

const ANTHROPIC_PRICING = 'platform.claude.com/docs/en/about-claude/pricing';
const VERTEX_PRICING = 'cloud.google.com/vertex-ai/generative-ai/pricing#claude-models';

/** Rules of every model (`*`) of a provider, and the models they do not reach. */
const RULES = [
  {
    provider: 'openai',
    model: '*',
    from: '2024-04-15',
    source: 'platform.openai.com/docs/guides/batch',
    prices: { 'tier:batch.multiplier': 0.5 },
    why: 'Batch API: 50% off inputs and outputs, every model it serves, since its launch on 2024-04-15',
  },
  {
    provider: 'anthropic',
    model: '*',
    from: '2024-10-08',
    source: 'platform.claude.com/docs/en/build-with-claude/batch-processing#pricing',
    prices: { 'tier:batch.multiplier': 0.5 },
    why: 'Message Batches API: 50% of standard prices on every token, cache multipliers stacked on top, since its launch on 2024-10-08',
  },
  {
    provider: 'google',
    model: '*',
    from: '2025-07-07',
    source: 'ai.google.dev/gemini-api/docs/batch-mode',
    prices: { 'tier:batch.multiplier': 0.5 },
    why: 'Gemini API Batch Mode: 50% of the interactive price, since its launch on 2025-07-07',
  },
  {
    provider: 'google-vertex',
    model: '*',
    from: '2025-01-01',
    source: 'cloud.google.com/vertex-ai/generative-ai/pricing',
    prices: { 'tier:batch.multiplier': 0.5, 'region:regional.multiplier': 1 },
    why: 'Vertex AI batch prediction at 50% of the online price (in force by 2025-01-01); Gemini costs the same on regional and global endpoints',
  },
  {
    provider: 'aws',
    model: '*',
    from: '2025-01-01',
    source: 'aws.amazon.com/bedrock/pricing',
    prices: { 'tier:batch.multiplier': 0.5 },
    why: 'Bedrock batch inference at 50% of the on-demand price (in force by 2025-01-01)',
  },
  {
    provider: 'anthropic',
    model: '*',
    from: '2026-02-05',
    source: 'support.claude.com/en/articles/15422948-enable-us-only-inference-for-your-organization',
    prices: { 'region:us.multiplier': 1.1 },
    why: `US-only inference (inference_geo "us") billed at 1.1x standard rates for Claude Opus 4.6 (released 2026-02-05) and later (${ANTHROPIC_PRICING})`,
  },
  ...[
    'claude-v1',
    'claude-2',
    'claude-3-haiku',
    'claude-3-sonnet',
    'claude-3-opus-latest',
    'claude-3-5-haiku-latest',
    'claude-3-5-sonnet',
    'claude-3-7-sonnet-latest',
    'claude-sonnet-4-0',
    'claude-opus-4-0',
    'claude-opus-4-1',
    'claude-sonnet-4-5',
    'claude-haiku-4-5',
    'claude-opus-4-5',
  ].map((model) => ({
    provider: 'anthropic',
    model,
    from: '2026-02-05',
    source: 'support.claude.com/en/articles/15422948-enable-us-only-inference-for-your-organization',
    prices: { 'region:us.multiplier': 1 },
    why: 'models before Opus 4.6 are billed at the standard rate under US-only inference',
  })),
  ...[
    ['claude-sonnet-4-5', '2025-09-29'],
    ['claude-haiku-4-5', '2025-10-15'],
    ['claude-opus-4-5', '2025-11-24'],
    ['claude-opus-4-6', '2026-02-05'],
    ['claude-sonnet-4-6', '2026-02-17'],
    ['claude-opus-4-7', '2026-02-05'],
    ['claude-opus-4-8', '2026-02-05'],
    ['claude-sonnet-5', '2026-02-05'],
    ['claude-opus-5', '2026-02-05'],
    ['claude-opus-5-5', '2026-02-05'],
    ['claude-fable-5', '2026-02-05'],
    ['claude-fable-5-1', '2026-02-05'],
  ].map(([model, from]) => ({
    provider: 'google-vertex',
    model,
    from,
    source: VERTEX_PRICING,
    // Vertex AI's ids: claude-sonnet-4-5@20250929, claude-sonnet-4-5 (and claude-opus-5, not claude-opus-5-5).
    match: { or: [{ equals: model }, { starts_with: `${model}@` }] },
    prices: { 'region:regional.multiplier': 1.1 },
    why: "Claude from Sonnet 4.5 on: regional and multi-region endpoints 10% above the global endpoint (no later than the model's release)",
  })),
];

const engine = await PriceEngine.create();
const second = bundledSecondCatalog();
const tag = secondCatalogTag(second.meta);
const at = Date.parse('2026-11-24T12:00:00Z');
const findings = auditPrices(engine, second, { at });

const adopted = Object.entries(ADOPT).map(([name, [from, why, match]]) => {
  const f = findings.find((x) => `${x.provider}/${x.model}` === name);
  if (f === undefined) throw new Error(`${name} is not flagged by the audit any more: drop it from the list`);
  const a = adoptionFor(engine, second, f, from);
  // A spelling priced apart from the rest of its catalog model (GovCloud's profile) is a model of its own.
  return match === undefined ? { ...a, why } : { ...a, model: f.model, match, why };
});

// 3. Per model the catalog knows, the second catalog's prices of the dimensions the catalog lacks.
const NEW_KEYS = /^(cache_write_1h_mtok|input_audio_mtok|cache_audio_read_mtok|output_audio_mtok|tier:[a-z]+\..+|region:[a-z]+\.multiplier)$/;
const targetOf = (a) => `${a.provider}\u0000${a.model}`;
const covered = new Set(adopted.map(targetOf));
const byTarget = new Map();
for (const [key, e] of Object.entries(second.entries)) {
  if (typeof e !== 'object' || e === null) continue;
  const target = entryTarget(key, e);
  if (target === undefined || engine.resolve('', target.provider, target.model, at) === null) continue;
  const f = { ...target, key, status: 'differs', source: null, diffs: [], diffSources: [] };
  const a = adoptionFor(engine, second, f, second.meta.date);
  if (covered.has(targetOf(a))) continue;
  const resolved = engine.resolve('', target.provider, target.model, at);
  const stated = resolved.merged;
  const keys = Object.entries(a.prices).filter(([k]) => NEW_KEYS.test(k) && stated?.get(k) === undefined);
  if (keys.length === 0) continue;
  let t = byTarget.get(targetOf(a));
  if (t === undefined) byTarget.set(targetOf(a), (t = { adoption: a, values: new Map(), entries: [] }));
  t.entries.push(key);
  // An entry whose standard input price is the catalog's prices the same spellings (Bedrock's geographic ids against its in-region one).
  const agrees = JSON.stringify(a.prices.input_mtok) === JSON.stringify(stated?.get('input_mtok')?.value);
  for (const [k, v] of keys) t.values.set(k, [...(t.values.get(k) ?? []), { v, own: target.model === a.model, agrees }]);
}
const generated = [];
let skipped = 0;
for (const { adoption, values, entries } of byTarget.values()) {
  const prices = {};
  for (const [k, candidates] of values) {
    // The entry named as the catalog's model speaks for it; else the entries whose input price is the catalog's,
    // else all of them, when they agree.
    const own = candidates.find((c) => c.own);
    const pool = candidates.some((c) => c.agrees) ? candidates.filter((c) => c.agrees) : candidates;
    const agreed = new Set(pool.map((c) => JSON.stringify(c.v))).size === 1;
    if (own !== undefined) prices[k] = own.v;
    else if (agreed) prices[k] = pool[0].v;
    else skipped++;
  }
  if (Object.keys(prices).length === 0) continue;
  generated.push({
    provider: adoption.provider,
    model: adoption.model,
    from: second.meta.date,
    source: tag,
    ...(adoption.match === undefined ? {} : { match: adoption.match }),
    prices,
    why:
      "the second catalog's one-hour cache, audio, service-tier and region prices the catalog lacks " +
      `(${entries.slice(0, 3).join(', ')}${entries.length > 3 ? ', ...' : ''})`,
  });
}
generated.sort((a, b) => a.provider.localeCompare(b.provider) || a.model.localeCompare(b.model));

const adoptions = [...adopted, ...RULES, ...generated];
const file = new URL('../catalog/adoptions.json', import.meta.url);
fs.writeFileSync(file, JSON.stringify({ second: tag, auditedAt: new Date(at).toISOString(), adoptions }, null, 2) + '\n');
console.log(
  `catalog/adoptions.json: ${adopted.length} adoptions, ${RULES.length} rules, ${generated.length} models' other dimensions from ${tag} ` +
    `(${skipped} prices left out where the second catalog's entries of one model disagree)`,
);
