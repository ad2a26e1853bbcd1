// Writes catalog/adoptions.json: the second catalog's prices this release adopts, taken from the
// audit's findings (data, never typed by hand). Each adopted model is listed with the provider page
// its price was checked against; run after updating either catalog:
//   npx tsc -b && node scripts/release-adoptions.mjs
import fs from 'node:fs';
import { PriceEngine } from '../packages/shared/dist/price-engine.js';
import { adoptionFor, auditPrices, bundledSecondCatalog, secondCatalogTag } from '../packages/shared/dist/price-audit.js';

/**
 * provider/model as the audit names them, and why the second catalog's price is the right one.
 * Not adopted although flagged: aws/anthropic.claude-sonnet-4-5-20250929-v1:0 (the second catalog
 * gives the in-region id the global endpoint's $3, where it is billed at the regional $3.30: the
 * regional adoption above prices it).
 */
const ADOPT = {
  'deepseek/deepseek-reasoner':
    'DeepSeek V3.2 prices since 2025-09-05: $0.28 input (cache miss), $0.028 cache hit, $0.42 output (api-docs.deepseek.com/quick_start/pricing)',
  'deepseek/deepseek-chat': 'same page and prices as deepseek-reasoner; the catalog still has the off-peak prices that ended 2025-09-05',
  'mistral/mistral-large-latest': 'mistral-large-latest is Mistral Large 3 (2512): $0.5 input, $1.5 output (docs.mistral.ai/models/mistral-large-3-25-12)',
  'anthropic/claude-sonnet-4-20250514':
    'above 200k input tokens: $6 input, $22.50 output, $0.60 cache read, $7.50 cache write (docs.claude.com pricing, long context)',
  'aws/us.anthropic.claude-sonnet-4-5-20250929-v1:0':
    'Bedrock Claude Sonnet 4.5, regional and geographic ids (us., eu., au., jp., and the in-region id): $3.30 / $16.50, ' +
    'above 200k input tokens $6.60 / $24.75 (aws.amazon.com/bedrock/pricing)',
  'aws/global.anthropic.claude-sonnet-4-5-20250929-v1:0':
    'Bedrock Claude Sonnet 4.5, global endpoint: $3 / $15, above 200k input tokens $6 / $22.50 (same page)',
  'mistral/mistral-small-latest':
    'mistral-small-latest is Mistral Small 3.2 (2506), $0.06 input, $0.18 output on mistral.ai/pricing (as synced by ' +
    'llmpricing.site on 2026-05-28, and as the second catalog prices mistral-small-3-2-2506); the catalog still has its launch $0.1 / $0.3',
  'x-ai/grok-4-0709': 'grok-4 (grok-4-0709) above 128k context: $6 input, $30 output; $3 / $15 below (docs.x.ai/docs/models)',
  'google-vertex/gemini-2.0-flash-001':
    'Vertex AI bills Gemini 2.0 Flash at $0.15 input, $0.60 output, unlike the Gemini API (cloud.google.com/vertex-ai/generative-ai/pricing)',
};

const engine = await PriceEngine.create();
const second = bundledSecondCatalog();
const at = Date.parse('2026-11-24T12:00:00Z');
const findings = auditPrices(engine, second, { at });
const adoptions = Object.entries(ADOPT).map(([name, why]) => {
  const f = findings.find((x) => `${x.provider}/${x.model}` === name);
  if (f === undefined) throw new Error(`${name} is not flagged by the audit any more: drop it from the list`);
  return { ...adoptionFor(engine, second, f), why };
});
const file = new URL('../catalog/adoptions.json', import.meta.url);
fs.writeFileSync(file, JSON.stringify({ second: secondCatalogTag(second.meta), auditedAt: new Date(at).toISOString(), adoptions }, null, 2) + '\n');
console.log(`catalog/adoptions.json: ${adoptions.length} adoptions from ${secondCatalogTag(second.meta)}`);
