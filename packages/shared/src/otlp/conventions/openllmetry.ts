import type { Convention } from '../convention.js';

/**
 * OpenLLMetry (Traceloop): the older semconv names (in semconv.ts) plus the
 * prompt and completion as plain or indexed attributes
 * (`gen_ai.prompt.0.role`, `gen_ai.prompt.0.content`, ...; read by the
 * mapping as messages). Golden document: openllmetry.golden.json.
 */
export const openllmetry: Convention = {
  name: 'openllmetry',
  inputText: ['gen_ai.prompt'],
  outputText: ['gen_ai.completion'],
  // Association properties set with Traceloop.setAssociationProperties({ user_id, customer_id, session_id }).
  customer: ['traceloop.association.properties.user_id', 'traceloop.association.properties.customer_id'],
  session: ['traceloop.association.properties.session_id'],
  // LangChain / LangGraph chains and agents (workflow, task, agent spans) sum the LLM spans under them.
  isWrapper(a) {
    const kind = a.str('traceloop.span.kind');
    return kind === 'workflow' || kind === 'task' || kind === 'agent';
  },
  // Its Anthropic instrumentations (JS and Python) copy Anthropic's own input_tokens, which counts neither
  // cache reads nor writes, and a total of input + output: the sizes cannot tell, the scope can.
  inputExcludesCache(source) {
    return ANTHROPIC_SCOPES.has(source.scopeName) ? true : undefined;
  },
};

const ANTHROPIC_SCOPES = new Set(['@traceloop/instrumentation-anthropic', 'opentelemetry.instrumentation.anthropic']);
