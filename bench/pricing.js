// ns per span of the price engine (cached resolution + exact decimal arithmetic)
// against the catalog's own calcPrice, over a realistic model mix. Medians of 5 runs.
import { calcPrice } from '@pydantic/genai-prices';
import { PriceEngine } from '../packages/shared/dist/price-engine.js';
import { MODELS as WORKLOAD_MODELS } from './workloads.js';

const MODELS = [...WORKLOAD_MODELS, ['openai', 'o4-mini'], [undefined, 'unknown-model-x']];
const N = Number(process.argv[2] ?? 1_000_000);
const base = Date.UTC(2026, 0, 15);
const spans = Array.from({ length: 10_000 }, (_, i) => {
  const [provider, modelId] = MODELS[i % MODELS.length];
  return {
    spanId: `s${i}`,
    spanType: 'llm',
    name: 'x',
    startTime: base + (i % 48) * 1_800_000,
    endTime: base + (i % 48) * 1_800_000 + 100,
    provider,
    modelId,
    usage: { inputTokens: 1000 + i, cachedInputTokens: i % 500, outputTokens: 200 + (i % 300), reasoningTokens: i % 7 === 0 ? 100 : 0 },
  };
});

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const engine = await PriceEngine.create();

function timeEngine(n) {
  const t0 = process.hrtime.bigint();
  let sink = 0;
  for (let i = 0; i < n; i++) sink += engine.price(spans[i % spans.length], 'org').total_cost.length;
  return { ns: Number(process.hrtime.bigint() - t0) / n, sink };
}

function timeCatalog(n) {
  const t0 = process.hrtime.bigint();
  let sink = 0;
  for (let i = 0; i < n; i++) {
    const s = spans[i % spans.length];
    const u = s.usage;
    const r = calcPrice({ input_tokens: u.inputTokens + u.cachedInputTokens, cache_read_tokens: u.cachedInputTokens, output_tokens: u.outputTokens + u.reasoningTokens }, s.modelId, { ...(s.provider ? { providerId: s.provider } : {}), timestamp: new Date(s.startTime) });
    sink += r === null ? 0 : r.total_price;
  }
  return { ns: Number(process.hrtime.bigint() - t0) / n, sink };
}

timeEngine(20_000);
timeCatalog(2_000);
const engineRuns = [];
const catalogRuns = [];
for (let r = 0; r < 5; r++) {
  engineRuns.push(timeEngine(N).ns);
  catalogRuns.push(timeCatalog(Math.max(1, Math.floor(N / 50))).ns);
}
const e = median(engineRuns);
const c = median(catalogRuns);
console.log(`price engine (cached, exact decimals): ${e.toFixed(0)} ns/span (median of 5 × ${N} spans)`);
console.log(`genai-prices calcPrice (floats, uncached): ${c.toFixed(0)} ns/span (median of 5 × ${Math.floor(N / 50)} spans)`);
console.log(`ratio: ${(c / e).toFixed(1)}× faster`);
