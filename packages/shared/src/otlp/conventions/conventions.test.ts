import { describe, expect, it } from 'vitest';
import { mapExportRequest, type OtlpKeyValue } from '../../otlp-genai.js';
import { oneSpanRequest } from '../one-span.js';
import { CONVENTIONS } from './index.js';

function mapped(attributes: OtlpKeyValue[]) {
  const sp = mapExportRequest(oneSpanRequest(attributes)).traces[0]?.spans[0];
  if (sp === undefined) throw new Error('no span mapped');
  return sp;
}
const s = (key: string, v: string): OtlpKeyValue => ({ key, value: { stringValue: v } });
const n = (key: string, v: number): OtlpKeyValue => ({ key, value: { intValue: v } });

describe.each(CONVENTIONS.map((c) => [c.name, c] as const))('the %s family, as registered', (_name, c) => {
  it('reads each of its names into its column, and none of them into metadata', () => {
    const cases: [readonly string[] | undefined, string, 'modelId' | 'input' | 'output'][] = [
      [c.model, 'm-1', 'modelId'],
      [c.inputText, 'hello', 'input'],
      [c.outputText, 'bye', 'output'],
    ];
    for (const [names, value, column] of cases) {
      for (const k of names ?? []) {
        const sp = mapped([s(k, value)]);
        expect(sp[column], k).toBe(value);
        expect(sp.metadata, k).toBeUndefined();
      }
    }
    for (const k of c.provider ?? []) expect(mapped([s(k, 'openai')]).metadata, k).toBeUndefined();
  });

  it('reads each of its usage names into its bucket', () => {
    const field = {
      input: 'inputTokens',
      output: 'outputTokens',
      cacheRead: 'cachedInputTokens',
      cacheWrite: 'cacheWriteInputTokens',
      reasoning: 'reasoningTokens',
      total: 'totalTokens',
    } as const;
    for (const [count, names] of Object.entries(c.usage ?? {})) {
      for (const k of names) expect(mapped([n(k, 7)]).usage?.[field[count as keyof typeof field]], k).toBe(7);
    }
  });
});

describe('the registry', () => {
  it('has one family per name', () => {
    expect(new Set(CONVENTIONS.map((c) => c.name)).size).toBe(CONVENTIONS.length);
  });
});
