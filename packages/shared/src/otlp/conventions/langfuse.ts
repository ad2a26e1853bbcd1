import type { Convention } from '../convention.js';

/** Langfuse's OpenTelemetry attributes (its SDKs and integrations set them on any span of a trace). */
export const langfuse: Convention = {
  name: 'langfuse',
  customer: ['langfuse.user.id'],
  session: ['langfuse.session.id'],
  traceName: ['langfuse.trace.name'],
};
