import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import type { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/** Noon, 15 January 2026 (UTC): the start of the agent run. */
export const NOON = Date.UTC(2026, 0, 15, 12, 0, 0);

/** An agent run with one chat call (cache reads inside the input count, as the conventions say) and one tool call. */
export async function agentRun(p: NodeTracerProvider): Promise<string> {
  const tracer = p.getTracer('otlp-test');
  const root = tracer.startSpan('invoke_agent support-bot', {
    startTime: NOON,
    attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support-bot', 'session.id': 'sess-1', 'enduser.id': 'cust-42' },
  });
  const ctx = trace.setSpan(context.active(), root);
  const chat = tracer.startSpan(
    'chat gpt-4o',
    {
      startTime: NOON + 10,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.response.model': 'gpt-4o-2024-08-06',
        'gen_ai.usage.input_tokens': 1234,
        'gen_ai.usage.cache_read.input_tokens': 1000,
        'gen_ai.usage.output_tokens': 567,
        'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Où est ma commande ?' }] }]),
        'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'En route.' }] }]),
        'http.response.status_code': 200,
      },
    },
    ctx,
  );
  chat.end(NOON + 810);
  const tool = tracer.startSpan(
    'execute_tool lookup_order',
    { startTime: NOON + 820, attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup_order' } },
    ctx,
  );
  tool.setStatus({ code: SpanStatusCode.ERROR, message: 'order service timed out' });
  tool.end(NOON + 900);
  root.end(NOON + 1000);
  await p.forceFlush();
  return root.spanContext().traceId;
}
