// Writes the catalog data bundled in @pydantic/genai-prices (its `Provider[]`, the shape of the
// upstream repository's prices/new_data/v2/data.json) to catalog/genai-prices.json, so the
// product ships its prices as a file it can replace:
//   node scripts/catalog-from-package.mjs
import fs from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const entry = require.resolve('@pydantic/genai-prices');
const dist = fs.readFileSync(entry.replace(/index\.(c?js)$/, 'index.js'), 'utf8');
const start = dist.indexOf('const E = [');
const end = dist.indexOf('\n], J = {');
if (start !== 0 || end < 0) throw new Error('the package layout changed: find its data array by hand');
const providers = new Function(`return ${dist.slice('const E = '.length, end)}\n];`)();
// The package tags each price constraint with a `type` of its own; the upstream file (and its schema) does not.
for (const p of providers)
  for (const m of p.models) if (Array.isArray(m.prices)) for (const c of m.prices) if (c.constraint !== undefined) delete c.constraint.type;
const version = JSON.parse(fs.readFileSync(entry.slice(0, entry.lastIndexOf('/dist/')) + '/package.json', 'utf8')).version;
fs.mkdirSync(new URL('../catalog/', import.meta.url), { recursive: true });
fs.writeFileSync(new URL('../catalog/genai-prices.json', import.meta.url), JSON.stringify(providers, null, 1) + '\n');
const models = providers.reduce((n, p) => n + p.models.length, 0);
console.log(`catalog/genai-prices.json: ${providers.length} providers, ${models} models, from @pydantic/genai-prices@${version}`);
