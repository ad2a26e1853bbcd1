// Realistic traces for the benchmarks that fill a store (growth.js, retention.js): 200 customers
// by a Zipf-like draw, 30 models over 6 providers, ~5 spans per trace, 1-3 KB input and output
// text on llm spans, start times spread evenly over 90 days in time order.

const DAY = 86_400_000;

const PROVIDERS = ['openai', 'anthropic', 'google', 'mistral', 'deepseek', 'xai'];
const MODEL_IDS = {
  openai: ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-4.1-mini', 'o3', 'o4-mini'],
  anthropic: ['claude-sonnet-4-20250514', 'claude-3-5-haiku-20241022', 'claude-opus-4-20250514', 'claude-3-7-sonnet-20250219', 'claude-sonnet-4-5'],
  google: ['gemini-2.5-pro', 'gemini-2.5-flash', 'gemini-2.0-flash', 'gemini-1.5-pro', 'gemini-2.5-flash-lite'],
  mistral: ['mistral-large-latest', 'mistral-small-latest', 'codestral-latest', 'ministral-8b-latest', 'open-mistral-nemo'],
  deepseek: ['deepseek-chat', 'deepseek-reasoner', 'deepseek-coder', 'deepseek-v3', 'deepseek-r1'],
  xai: ['grok-4', 'grok-3', 'grok-3-mini', 'grok-2', 'grok-code-fast-1'],
};
const WORDS = (
  'the user asked about their invoice and the assistant looked up the account history then summarised the charges ' +
  'for the last three months with a note on the refund policy and a link to the billing page while the tool returned ' +
  'a table of line items dates amounts and currencies that the model turned into a short friendly answer'
).split(' ');

function text(rand, chars) {
  const parts = [];
  let n = 0;
  while (n < chars) {
    const w = WORDS[Math.floor(rand() * WORDS.length)];
    parts.push(w);
    n += w.length + 1;
  }
  return parts.join(' ').slice(0, chars);
}

/** Realistic traces in start-time order: `total` spans spread evenly over the `span` ms (90 days) before `end`. */
export function* traces(total, end, rand, span = 90 * DAY) {
  const start = end - span;
  const step = span / total;
  let made = 0;
  let t = 0;
  while (made < total) {
    const at = Math.floor(start + made * step);
    // Zipf-like: a few customers send most traces.
    const customer = Math.min(199, Math.floor(200 * rand() ** 3));
    const provider = PROVIDERS[Math.floor(rand() * PROVIDERS.length)];
    const spans = [{ spanId: `s0`, spanType: 'agent', name: 'agent', startTime: at, endTime: at + 9000 }];
    for (let i = 1; i < 5 && made + spans.length < total; i++) {
      const modelId = MODEL_IDS[provider][Math.floor(rand() * 5)];
      const s = at + i * 1500;
      spans.push({
        spanId: `s${i}`,
        parentSpanId: 's0',
        spanType: i === 4 ? 'tool' : 'llm',
        name: i === 4 ? 'lookup' : 'chat',
        startTime: s,
        endTime: s + 1200,
        ...(i === 4
          ? {}
          : {
              provider,
              modelId,
              usage: { inputTokens: 200 + Math.floor(rand() * 4000), cachedInputTokens: Math.floor(rand() * 200), outputTokens: 50 + Math.floor(rand() * 700) },
              input: text(rand, 1000 + Math.floor(rand() * 2000)),
              output: text(rand, 1000 + Math.floor(rand() * 2000)),
            }),
        metadata: { step: String(i), region: rand() < 0.5 ? 'eu' : 'us' },
      });
    }
    yield {
      traceId: `tr-${t++}-${Math.floor(rand() * 1e9).toString(36)}`,
      traceName: ['support', 'search', 'summarise', 'triage'][t % 4],
      workflowName: `wf-${t % 10}`,
      sessionId: `sess-${customer}-${Math.floor(t / 20)}`,
      customer: { id: `cust-${customer}`, name: `Customer ${customer}` },
      metadata: { env: 'prod' },
      spans,
    };
    made += spans.length;
  }
}
