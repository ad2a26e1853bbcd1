import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { onTestFinished } from 'vitest';

/** What the fake answers with, beyond its defaults: the model, the service tier, a chat completion's and a response's usage. */
export interface FakeOpenAiAnswer {
  model?: string;
  serviceTier?: string;
  chatUsage?: Record<string, unknown>;
  responsesUsage?: Record<string, unknown>;
}

/** An OpenAI-compatible server that answers every chat completion and response with the same usage. */
export async function fakeOpenAi(answer: FakeOpenAiAnswer = {}): Promise<string> {
  const usage = answer.chatUsage ?? { prompt_tokens: 1200, completion_tokens: 300, total_tokens: 1500, prompt_tokens_details: { cached_tokens: 1000 } };
  const model = answer.model ?? 'gpt-4o-2024-08-06';
  const tier = answer.serviceTier === undefined ? {} : { service_tier: answer.serviceTier };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url?.endsWith('/responses'))
        res.end(
          JSON.stringify({
            id: 'resp_1',
            object: 'response',
            created_at: 1,
            model,
            status: 'completed',
            ...tier,
            output: [
              {
                type: 'message',
                id: 'msg_1',
                status: 'completed',
                role: 'assistant',
                content: [{ type: 'output_text', text: 'On its way.', annotations: [] }],
              },
            ],
            usage: answer.responsesUsage ?? {
              input_tokens: 1200,
              input_tokens_details: { cached_tokens: 1000 },
              output_tokens: 300,
              output_tokens_details: { reasoning_tokens: 0 },
              total_tokens: 1500,
            },
          }),
        );
      else
        res.end(
          JSON.stringify({
            id: 'c1',
            object: 'chat.completion',
            created: 1,
            model,
            ...tier,
            choices: [{ index: 0, message: { role: 'assistant', content: 'On its way.' }, finish_reason: 'stop' }],
            usage,
          }),
        );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  onTestFinished(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}
