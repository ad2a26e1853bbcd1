import type { StreamAdapter } from './providers/common.js';
import { StreamTimer } from './sampling.js';
import type { Span, SpanEnd } from './trace.js';

/** Output text kept for a span is cut here (the contract's limit for `output`). */
const MAX_TEXT = 1_000_000;

/**
 * Passes a provider's stream through unchanged while timing it; when the
 * stream ends (or the consumer stops early, or it throws) the span ends with
 * ttftMs, the sampled chunk curves, the usage the stream reported and the
 * output text. The stream's own errors are rethrown: they are the
 * application's; the recording never adds one.
 *
 * @example
 * for await (const chunk of recordStream(span, await openai.chat.completions.create({ ..., stream: true }), openaiChatStream())) { ... }
 */
export async function* recordStream<C>(span: Span, chunks: AsyncIterable<C>, adapter: StreamAdapter<C>, end: SpanEnd = {}): AsyncGenerator<C, void, undefined> {
  const timer = new StreamTimer(span.startMonotonic);
  let output = '';
  let soFar = 0;
  let failure: { error: unknown } | undefined;
  try {
    for await (const chunk of chunks) {
      try {
        const info = adapter.chunk(chunk);
        if (info?.reasoning !== undefined) timer.reasoning();
        if (info?.output !== undefined) {
          let tokens = 1;
          if (info.outputTokensSoFar !== undefined) {
            tokens = Math.max(0, info.outputTokensSoFar - soFar);
            soFar = Math.max(soFar, info.outputTokensSoFar);
          }
          timer.output(tokens);
          if (output.length < MAX_TEXT) output += info.output;
        }
      } catch {
        // A chunk the adapter cannot read is passed through unrecorded.
      }
      yield chunk;
    }
  } catch (e) {
    failure = { error: e };
    throw e;
  } finally {
    try {
      const usage = end.usage ?? adapter.usage();
      const fields = timer.fields({ outputTokens: usage?.outputTokens, reasoningTokens: usage?.reasoningTokens });
      const model = adapter.model();
      span.end({
        provider: adapter.provider,
        ...(model === undefined ? {} : { model }),
        ...adapter.billing?.(),
        ...fields,
        ...(usage === undefined ? {} : { usage }),
        ...(output === '' ? {} : { output: output.slice(0, MAX_TEXT) }),
        ...end,
        ...(failure === undefined ? {} : { error: failure.error }),
      });
    } catch {
      // Recording must never replace the stream's own outcome.
    }
  }
}
