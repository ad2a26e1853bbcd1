import type { SpanType } from '../../schema.js';
import type { Convention } from '../convention.js';

/** OpenInference's span kinds. */
const SPAN_KINDS: Record<string, SpanType> = { LLM: 'llm', EMBEDDING: 'embedding', TOOL: 'tool', AGENT: 'agent' };

/** OpenInference (Arize Phoenix's instrumentations). Golden document: openinference.golden.json. */
export const openinference: Convention = {
  name: 'openinference',
  model: ['llm.model_name'],
  provider: ['llm.provider', 'llm.system'],
  usage: {
    input: ['llm.token_count.prompt'],
    output: ['llm.token_count.completion'],
    cacheRead: ['llm.token_count.prompt_details.cache_read'],
    cacheWrite: ['llm.token_count.prompt_details.cache_write'],
    reasoning: ['llm.token_count.completion_details.reasoning'],
    total: ['llm.token_count.total'],
    audioInput: ['llm.token_count.prompt_details.audio'],
    audioOutput: ['llm.token_count.completion_details.audio'],
  },
  inputText: ['input.value'],
  outputText: ['output.value'],
  consumed: ['openinference.span.kind'],
  customer: ['user.id'],
  session: ['session.id'],
  // CHAIN and AGENT spans sum the LLM spans under them.
  isWrapper(a) {
    const kind = a.str('openinference.span.kind')?.toUpperCase();
    return kind === 'CHAIN' || kind === 'AGENT';
  },
  spanType(a) {
    const kind = a.str('openinference.span.kind');
    return kind === undefined ? undefined : (SPAN_KINDS[kind.toUpperCase()] ?? 'other');
  },
};
