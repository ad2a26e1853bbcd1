// Records two traces of a tiny support bot that calls a fake model, then
// exits; the SDK sends what it recorded before the process ends.
//
//   export TRACE_INGEST_API_KEY=$(npx trace-ingest keys create --org acme)
//   node examples/send-traces.mjs
//   npx trace-ingest usage --org acme --by model
import { TraceIngest, openaiUsage, anthropicStream, recordStream } from '@trace-ingest/sdk';

const client = new TraceIngest(); // TRACE_INGEST_URL (default http://localhost:4000), TRACE_INGEST_API_KEY

/** Stands in for `openai.chat.completions.create(...)`: a response shaped like the real one. */
async function fakeOpenAI(prompt) {
  await new Promise((r) => setTimeout(r, 30));
  return {
    model: 'gpt-4o-mini',
    choices: [{ message: { role: 'assistant', content: `You asked: ${prompt}. Try restarting the router.` } }],
    usage: {
      prompt_tokens: 1200,
      completion_tokens: 80,
      total_tokens: 1280,
      prompt_tokens_details: { cached_tokens: 1024 },
      completion_tokens_details: { reasoning_tokens: 0 },
    },
  };
}

/** Stands in for `anthropic.messages.create({ ..., stream: true })`: the events of a streamed reply. */
async function* fakeAnthropicStream(text) {
  yield {
    type: 'message_start',
    message: { model: 'claude-sonnet-4-20250514', usage: { input_tokens: 900, cache_read_input_tokens: 2000, output_tokens: 1 } },
  };
  for (const word of text.split(' ')) {
    await new Promise((r) => setTimeout(r, 10));
    yield { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `${word} ` } };
  }
  yield { type: 'message_delta', usage: { output_tokens: 42 } };
}

for (const customer of ['cust-1', 'cust-2']) {
  const trace = client.startTrace({ name: 'support-reply', agent: 'support-bot', customer, session: `session-${customer}` });
  const turn = trace.startSpan({ name: 'answer', type: 'agent' });

  const draft = turn.startSpan({ name: 'draft', provider: 'openai', model: 'gpt-4o-mini', input: 'My wifi is down' });
  const res = await fakeOpenAI('My wifi is down');
  draft.end({ output: res.choices[0].message.content, usage: openaiUsage(res) });

  const polish = turn.startSpan({ name: 'polish', provider: 'anthropic', model: 'claude-sonnet-4' });
  let reply = '';
  for await (const event of recordStream(polish, fakeAnthropicStream('Please restart your router and wait one minute.'), anthropicStream())) {
    if (event.type === 'content_block_delta') reply += event.delta.text;
  }
  turn.end({ output: reply.trim() });
  console.log(`${customer}: trace ${trace.traceId}`);
}

// Optional here (a beforeExit hook would flush too); a server would call it on SIGTERM.
await client.shutdown();
console.log('stats', client.getStats());
