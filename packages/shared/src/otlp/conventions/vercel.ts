import type { Convention, SpanBilling } from '../convention.js';
import type { Attrs } from '../attrs.js';

/**
 * The Vercel AI SDK's provider strings (`openai.chat`, `amazon-bedrock`,
 * `google.vertex.chat`, ...) as the conventions spell providers; the price
 * engine resolves those ids.
 */
const PROVIDERS: Record<string, string> = {
  'amazon-bedrock': 'aws.bedrock',
  'google.vertex': 'gcp.vertex_ai',
  'google.generative-ai': 'gcp.gemini',
  'azure-openai': 'azure.ai.openai',
  azure: 'azure.ai.openai',
  xai: 'x_ai',
  mistral: 'mistral_ai',
};

const isVercel = (a: Attrs): boolean => a.str('ai.operationId') !== undefined;

const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined);
const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** Audio tokens of a Gemini modality breakdown (`[{ modality: 'AUDIO', tokenCount }]`). */
function audioOf(details: unknown): number | undefined {
  if (!Array.isArray(details)) return undefined;
  let sum = 0;
  for (const d of details) if (obj(d)?.modality === 'AUDIO') sum += count(obj(d)?.tokenCount) ?? 0;
  return sum === 0 ? undefined : sum;
}

/**
 * What the SDK's providers put in `ai.response.providerMetadata` (JSON) about the bill: OpenAI's
 * service tier, Anthropic's raw usage (service tier, inference geography, cache writes by
 * lifetime), Gemini's and Vertex AI's usage metadata (traffic type, audio by modality).
 */
function providerBilling(json: string): SpanBilling | undefined {
  let m: Record<string, unknown> | undefined;
  try {
    m = obj(JSON.parse(json));
  } catch {
    return undefined;
  }
  if (m === undefined) return undefined;
  const anthropic = obj(obj(m.anthropic)?.usage);
  const google = obj(obj(m.google)?.usageMetadata) ?? obj(obj(m.vertex)?.usageMetadata);
  const oneHour = count(obj(anthropic?.cache_creation)?.ephemeral_1h_input_tokens);
  const usage: NonNullable<SpanBilling['usage']> = {};
  if (oneHour !== undefined && oneHour > 0) usage.cacheWrite1h = oneHour;
  const audioIn = audioOf(google?.promptTokensDetails);
  const audioOut = audioOf(google?.candidatesTokensDetails);
  if (audioIn !== undefined) usage.audioInput = audioIn;
  if (audioOut !== undefined) usage.audioOutput = audioOut;
  const traffic = text(google?.trafficType);
  return {
    serviceTier: text(obj(m.openai)?.serviceTier) ?? text(anthropic?.service_tier) ?? (traffic === 'TRAFFIC_TYPE_UNSPECIFIED' ? undefined : traffic),
    region: text(anthropic?.inference_geo),
    usage,
  };
}

/** The Vercel AI SDK's `ai.*` telemetry. Golden document: vercel.golden.json. */
export const vercel: Convention = {
  name: 'vercel',
  model: ['ai.response.model', 'ai.model.id'],
  provider: ['ai.model.provider'],
  usage: {
    input: ['ai.usage.inputTokens', 'ai.usage.promptTokens'],
    output: ['ai.usage.outputTokens', 'ai.usage.completionTokens'],
    // AI SDK 6 details the input (noCacheTokens + cacheReadTokens + cacheWriteTokens = inputTokens) and the output.
    cacheRead: ['ai.usage.cachedInputTokens', 'ai.usage.inputTokenDetails.cacheReadTokens'],
    cacheWrite: ['ai.usage.inputTokenDetails.cacheWriteTokens'],
    reasoning: ['ai.usage.reasoningTokens', 'ai.usage.outputTokenDetails.reasoningTokens'],
    total: ['ai.usage.totalTokens'],
  },
  inputText: ['ai.prompt.messages', 'ai.prompt'],
  outputText: ['ai.response.text', 'ai.response.object'],
  ttft: ['ai.response.msToFirstChunk', 'ai.stream.msToFirstChunk'],
  reads: ['ai.operationId', 'ai.response.providerMetadata'],
  customer: ['ai.telemetry.metadata.userId'],
  session: ['ai.telemetry.metadata.sessionId'],
  traceName: ['ai.telemetry.functionId'],
  spanType(a) {
    const op = a.str('ai.operationId');
    if (op === undefined) return undefined;
    if (/\.do(Generate|Stream)$/.test(op)) return 'llm';
    if (/\.doEmbed$/.test(op)) return 'embedding';
    if (op === 'ai.toolCall') return 'tool';
    return undefined;
  },
  providerOf(a) {
    if (!isVercel(a)) return undefined;
    // The SDK writes its own provider string into gen_ai.system too.
    const sdk = a.first(['ai.model.provider', 'gen_ai.provider.name', 'gen_ai.system']);
    if (sdk === undefined) return { value: undefined };
    for (const [prefix, id] of Object.entries(PROVIDERS)) if (sdk === prefix || sdk.startsWith(prefix + '.')) return { value: id };
    const dot = sdk.indexOf('.');
    return { value: dot > 0 ? sdk.slice(0, dot) : sdk };
  },
  // The AI SDK writes its providers' metadata on the `.do*` spans of AI SDK 6 and, through @ai-sdk/otel
  // (providerMetadata: true), on AI SDK 7's semconv spans alike.
  billingOf(a) {
    const json = a.str('ai.response.providerMetadata');
    return json === undefined ? undefined : providerBilling(json);
  },
  // The outer spans (ai.generateText, ai.streamText, ...) repeat the sum of their `.do*` children's usage.
  isWrapper(a) {
    const op = a.str('ai.operationId');
    return op !== undefined && op.startsWith('ai.') && !/\.do[A-Z]/.test(op);
  },
};
