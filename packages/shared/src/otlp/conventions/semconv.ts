import type { SpanType } from '../../schema.js';
import type { Convention } from '../convention.js';

/** gen_ai.operation.name → span type. */
const OPERATION_TYPES: Record<string, SpanType> = {
  chat: 'llm',
  text_completion: 'llm',
  generate_content: 'llm',
  embeddings: 'embedding',
  execute_tool: 'tool',
  invoke_agent: 'agent',
  create_agent: 'agent',
};

/**
 * The OpenTelemetry GenAI semantic conventions, current names first, then the
 * older names of earlier versions that instrumentations still send
 * (`gen_ai.usage.prompt_tokens`, ...). Golden document: semconv.golden.json.
 */
export const semconv: Convention = {
  name: 'semconv',
  // The response's model is what ran; the request's is what was asked for.
  model: ['gen_ai.response.model', 'gen_ai.request.model'],
  provider: ['gen_ai.provider.name', 'gen_ai.system'],
  usage: {
    input: ['gen_ai.usage.input_tokens', 'gen_ai.usage.prompt_tokens'],
    output: ['gen_ai.usage.output_tokens', 'gen_ai.usage.completion_tokens'],
    cacheRead: ['gen_ai.usage.cache_read.input_tokens', 'gen_ai.usage.cache_read_input_tokens'],
    cacheWrite: ['gen_ai.usage.cache_creation.input_tokens', 'gen_ai.usage.cache_creation_input_tokens'],
    reasoning: ['gen_ai.usage.reasoning.output_tokens', 'gen_ai.usage.reasoning_tokens'],
    // llm.usage.total_tokens: the name before gen_ai.usage.* (OpenLLMetry still sends it).
    total: ['gen_ai.usage.total_tokens', 'llm.usage.total_tokens'],
  },
  // OpenAI's own attributes of the conventions: the tier that served the response, else the one asked for.
  serviceTier: ['openai.response.service_tier', 'gen_ai.openai.response.service_tier', 'openai.request.service_tier', 'gen_ai.openai.request.service_tier'],
  inputText: ['gen_ai.input.messages'],
  outputText: ['gen_ai.output.messages'],
  consumed: ['gen_ai.operation.name', 'gen_ai.agent.name'],
  spanType(a) {
    const op = a.str('gen_ai.operation.name');
    return op === undefined ? undefined : (OPERATION_TYPES[op] ?? 'other');
  },
  reads: ['server.address'],
  // The host a call went to says the region its provider billed it in: OpenAI's data-residency hosts
  // (us.api.openai.com, eu.api.openai.com), a Vertex AI location (us-east5-aiplatform.googleapis.com;
  // aiplatform.googleapis.com is the global endpoint).
  billingOf(a) {
    const host = a.str('server.address')?.toLowerCase();
    if (host === undefined) return undefined;
    const openai = /^(us|eu)\.api\.openai\.com$/.exec(host);
    if (openai !== null) return { region: openai[1] };
    const vertex = /^(?:([a-z0-9-]+)-)?aiplatform\.googleapis\.com$/.exec(host);
    if (vertex !== null) return { region: vertex[1] ?? 'global' };
    return undefined;
  },
  // An agent invocation that reports usage reports its model calls' sum (the calls are spans of their own).
  isWrapper: (a) => a.str('gen_ai.operation.name') === 'invoke_agent',
};
