// Deterministic request bodies for the benchmark (seeded PRNG: the same bytes on every machine).
//
// Every trace id carries a fixed-width slot (ID_WIDTH characters) that the load
// generator overwrites in place with a counter before each request, so every
// request carries new (trace, span) ids while the body keeps its exact length.
// Without it, the store's deduplication on (org_id, trace_id, span_id) would
// collapse repeated bodies and the end-to-end count could not tell a lost span
// from a duplicate. See README.md, "Counting spans".

export const ID_WIDTH = 12;
const SLOT = '@'.repeat(ID_WIDTH);
const MAX_BODY_BYTES = 10 * 1024 * 1024;

export function prng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = 'the model answered with a short summary of the tool results and a plan for the next step'.split(' ');
export const MODELS = [
  ['openai', 'gpt-4o'],
  ['openai', 'gpt-4o-mini'],
  ['anthropic', 'claude-sonnet-4-20250514'],
  ['google', 'gemini-2.5-pro'],
  ['mistral', 'mistral-large-latest'],
];

function text(rand, chars) {
  let out = '';
  while (out.length < chars) out += WORDS[Math.floor(rand() * WORDS.length)] + ' ';
  out = out.slice(0, chars);
  // 5% of texts carry a non-ASCII character, which makes decoding measurably slower.
  return rand() < 0.05 ? out.slice(0, -1) + 'é' : out;
}

function span(rand, i, textChars) {
  const [provider, modelId] = MODELS[Math.floor(rand() * MODELS.length)];
  const start = 1767225600000 + Math.floor(rand() * 86_400_000);
  return {
    spanId: `s${i}`,
    ...(i > 0 ? { parentSpanId: 's0' } : {}),
    spanType: i === 0 ? 'agent' : 'llm',
    name: `step-${i}`,
    startTime: start,
    endTime: start + Math.floor(rand() * 5000),
    provider,
    modelId,
    usage: { inputTokens: Math.floor(rand() * 5000), cachedInputTokens: Math.floor(rand() * 1000), outputTokens: Math.floor(rand() * 800) },
    input: text(rand, textChars),
    output: text(rand, textChars),
    metadata: { env: 'bench', region: 'eu' },
  };
}

function template(seed, traces, spans, textChars) {
  const rand = prng(seed);
  const json = JSON.stringify({
    version: 'v1',
    traces: Array.from({ length: traces }, (_, t) => ({
      traceId: `${SLOT}-${t}`,
      traceName: 'bench',
      customer: { id: `cust-${Math.floor(rand() * 50)}` },
      spans: Array.from({ length: spans }, (_, i) => span(rand, i, textChars)),
    })),
  });
  const body = Buffer.from(json, 'utf8');
  if (body.length > MAX_BODY_BYTES) throw new Error(`workload body of ${body.length} bytes exceeds the 10 MiB limit`);
  const slots = [];
  for (let at = body.indexOf(SLOT); at >= 0; at = body.indexOf(SLOT, at + ID_WIDTH)) slots.push(at);
  return { body, slots, spans: traces * spans };
}

const SPECS = {
  // 1 span per request: per-request overhead (auth, routing, group commit).
  tiny: [1, 1, 1, 40],
  // 10 traces × 10 spans, ~300-character texts: ~100 KB.
  small: [2, 10, 10, 340],
  // 20 traces × 50 spans, ~2 KB input and output texts: ~4.5 MB.
  large: [3, 20, 50, 2000],
  // 45 traces × 100 spans, ~1 KB texts: ~9.6 MB, just under the 10 MiB body limit.
  max: [4, 45, 100, 1000],
};
export const WORKLOAD_NAMES = Object.keys(SPECS);

const cache = new Map();
/** name → { body: Buffer (id slots still blank), slots: byte offsets of the id slots, spans per request } */
export function workload(name) {
  const spec = SPECS[name];
  if (!spec) throw new Error(`unknown workload "${name}" (known: ${WORKLOAD_NAMES.join(', ')})`);
  if (!cache.has(name)) cache.set(name, template(...spec));
  return cache.get(name);
}

/** Writes request number `n` into every id slot of `body`, in place: ids `<n base 36, zero-padded>-<trace>`. */
export function stamp(body, slots, n) {
  const id = n.toString(36).padStart(ID_WIDTH, '0');
  if (id.length > ID_WIDTH) throw new Error('request counter overflowed the id slot');
  for (const at of slots) body.write(id, at, ID_WIDTH, 'latin1');
  return body;
}
