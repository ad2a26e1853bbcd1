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
};
