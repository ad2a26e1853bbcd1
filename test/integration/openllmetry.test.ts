import * as traceloop from '@traceloop/node-server-sdk';
import OpenAI from 'openai';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CliContext } from '@trace-ingest/cli/program-context';
import { usage } from '@trace-ingest/cli/actions/usage';
import { fakeOpenAi } from './support/fake-openai.js';
import { serverWithCli, type TestServer } from './support/ingest-server.js';

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * The README's OpenLLMetry JS recipe, run as written: `initialize({ baseUrl,
 * headers })` and association properties for the customer and session. Its
 * own process (vitest runs each file in one): the SDK registers itself globally.
 */
describe('OpenLLMetry JS (Traceloop SDK) sending to /v1/traces', () => {
  const both = serverWithCli();
  let t: TestServer;
  let ctx: CliContext;
  beforeAll(() => {
    t = both.server();
    ctx = both.cli();
  });

  it('stores its OpenAI calls under the association properties customer and session, as sent (no cached count)', async () => {
    const { key, orgId } = await t.newKey('traceloop');
    const baseURL = await fakeOpenAi();
    traceloop.initialize({
      appName: 'support-bot',
      baseUrl: t.url,
      headers: { 'x-api-key': key },
      disableBatch: true,
      // The same module; the SDK's types name it through openai's CommonJS declarations, this file through its ESM ones.
      instrumentModules: { openAI: OpenAI as never },
      silenceInitializationMessage: true,
    });
    const client = new OpenAI({ baseURL, apiKey: 'test' });
    await traceloop.withAssociationProperties({ user_id: 'cust-3', session_id: 'sess-3' }, () =>
      client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Where is my order?' }] }),
    );
    await traceloop.forceFlush();
    const rows = await t.spans(
      'SELECT customer_id, session_id, provider, model_id, input_tokens::INTEGER AS i, cached_input_tokens::INTEGER AS c, ' +
        'output_tokens::INTEGER AS o, CAST(total_cost AS VARCHAR) AS cost FROM spans WHERE org_id = ?',
      [orgId],
    );
    // OpenAI's 1,000 cached tokens are not sent by this instrumentation: the input is priced whole (README: libraries that under-report).
    expect(rows).toEqual([
      { customer_id: 'cust-3', session_id: 'sess-3', provider: 'openai', model_id: 'gpt-4o-2024-08-06', i: 1200, c: 0, o: 300, cost: '0.006000000000000000' },
    ]);
    const byCustomer = await usage(ctx, { org: 'traceloop', from: day(Date.now() - 86_400_000), to: day(Date.now() + 86_400_000), by: 'customer' });
    expect(byCustomer.map((r) => [r.group, r.costs.total_cost])).toEqual([['cust-3', '0.006']]);
  });
});
