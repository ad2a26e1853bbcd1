import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { onTestFinished } from 'vitest';

/** An OpenAI-compatible server that answers every chat completion and response with the same usage. */
export async function fakeOpenAi(): Promise<string> {
  const usage = { prompt_tokens: 1200, completion_tokens: 300, total_tokens: 1500, prompt_tokens_details: { cached_tokens: 1000 } };
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
            model: 'gpt-4o-2024-08-06',
            status: 'completed',
            output: [
              {
                type: 'message',
                id: 'msg_1',
                status: 'completed',
                role: 'assistant',
                content: [{ type: 'output_text', text: 'On its way.', annotations: [] }],
              },
            ],
            usage: {
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
            model: 'gpt-4o-2024-08-06',
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
