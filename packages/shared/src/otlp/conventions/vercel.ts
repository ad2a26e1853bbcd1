import type { Convention } from '../convention.js';
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
  reads: ['ai.operationId'],
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
  // The outer spans (ai.generateText, ai.streamText, ...) repeat the sum of their `.do*` children's usage.
  isWrapper(a) {
    const op = a.str('ai.operationId');
    return op !== undefined && op.startsWith('ai.') && !/\.do[A-Z]/.test(op);
  },
};
