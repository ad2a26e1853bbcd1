// ns per span of the price engine (cached resolution + exact decimal arithmetic)
// against the catalog's own calcPrice, over a realistic model mix. Medians of 5 runs.
//
//   npx tsc -b packages/shared && node bench/pricing.js [spans per run]
//
// calcPrice takes tens of µs per call, so it runs on 1/50 of the spans.
import { calcPrice } from '@pydantic/genai-prices';
import { PriceEngine } from '../packages/shared/dist/price-engine.js';
import { MODELS as WORKLOAD_MODELS } from './workloads.js';

const MODELS = [
  ...WORKLOAD_MODELS,
  ['openai', 'o4-mini'],
  [undefined, 'openai/gpt-4o-mini'],
  ['gcp.gen_ai', 'gemini-2.5-flash'],
  ['x_ai', 'grok-4'],
  ['openai', 'text-embedding-3-small'],
  [undefined, 'unknown-model-x'],
];
const N = Number(process.argv[2] ?? 1_000_000);
const RUNS = 5;
const DISTINCT = 10_000;
const base = Date.UTC(2026, 0, 15);

// One day of traffic: 48 half-hour buckets, so resolutions are mostly cached.
const spans = Array.from({ length: DISTINCT }, (_, i) => {
  const [provider, modelId] = MODELS[i % MODELS.length];
  const startTime = base + (i % 48) * 1_800_000 + (i % 1000);
  return {
    spanId: `s${i}`,
    spanType: 'llm',
    name: 'x',
    startTime,
    endTime: startTime + 100,
    provider,
    modelId,
    usage: {
      inputTokens: 1000 + i,
      cachedInputTokens: i % 500,
      cacheWriteInputTokens: i % 11 === 0 ? 200 : 0,
      outputTokens: 200 + (i % 300),
      reasoningTokens: i % 7 === 0 ? 100 : 0,
    },
  };
});

// The library counts cache reads and writes inside input, reasoning inside output.
const catalogUsage = spans.map(({ usage: u }) => ({
  input_tokens: u.inputTokens + u.cachedInputTokens + u.cacheWriteInputTokens,
  cache_read_tokens: u.cachedInputTokens,
  cache_write_tokens: u.cacheWriteInputTokens,
  output_tokens: u.outputTokens + u.reasoningTokens,
}));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function timeEngine(engine, n) {
  const t0 = process.hrtime.bigint();
  let sink = 0;
  for (let i = 0; i < n; i++) sink += engine.price(spans[i % DISTINCT], 'org').total_cost.length;
  return { ns: Number(process.hrtime.bigint() - t0) / n, sink };
}

function timeCatalog(n) {
  const t0 = process.hrtime.bigint();
  let sink = 0;
  for (let i = 0; i < n; i++) {
    const s = spans[i % DISTINCT];
    let r = null;
    try {
      r = calcPrice(catalogUsage[i % DISTINCT], s.modelId, { ...(s.provider ? { providerId: s.provider } : {}), timestamp: new Date(s.startTime) });
    } catch {
      r = null;
    }
    sink += r === null ? 0 : r.total_price;
  }
  return { ns: Number(process.hrtime.bigint() - t0) / n, sink };
}

const engine = await PriceEngine.create();
const catalogN = Math.max(1, Math.floor(N / 50));
timeEngine(engine, 50_000);
timeCatalog(2_000);
const engineRuns = [];
const catalogRuns = [];
for (let r = 0; r < RUNS; r++) {
  engineRuns.push(timeEngine(engine, N).ns);
  catalogRuns.push(timeCatalog(catalogN).ns);
}
const e = median(engineRuns);
const c = median(catalogRuns);
console.log(
  `PriceEngine.price (cached, exact decimals): ${e.toFixed(0)} ns/span ` +
    `(median of ${RUNS} × ${N} spans; runs ${engineRuns.map((x) => x.toFixed(0)).join(', ')})`,
);
console.log(
  `genai-prices calcPrice (floats, uncached):  ${c.toFixed(0)} ns/span ` +
    `(median of ${RUNS} × ${catalogN} spans; runs ${catalogRuns.map((x) => x.toFixed(0)).join(', ')})`,
);
console.log(`ratio: ${(c / e).toFixed(1)}× faster`);
