// Deterministic request bodies for the benchmark. `[<id>]` is replaced by
// autocannon with a fresh id per request, so every request carries new spans.

function prng(seed) {
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

function body(seed, traces, spans, textChars) {
  const rand = prng(seed);
  return JSON.stringify({
    version: 'v1',
    traces: Array.from({ length: traces }, (_, t) => ({
      traceId: `[<id>]-${t}`,
      traceName: 'bench',
      customer: { id: `cust-${Math.floor(rand() * 50)}` },
      spans: Array.from({ length: spans }, (_, i) => span(rand, i, textChars)),
    })),
  });
}

/** name → { body, spans per request } */
export const WORKLOADS = {
  tiny: () => ({ body: body(1, 1, 1, 40), spans: 1 }),
  small: () => ({ body: body(2, 10, 10, 300), spans: 100 }),
  large: () => ({ body: body(3, 20, 50, 2000), spans: 1000 }),
  max: () => ({ body: body(4, 45, 100, 1000), spans: 4500 }),
};
