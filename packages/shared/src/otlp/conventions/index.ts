import { slotOf } from '../attrs.js';
import type { Convention, UsageCount } from '../convention.js';
import { langfuse } from './langfuse.js';
import { openinference } from './openinference.js';
import { openllmetry } from './openllmetry.js';
import { semconv } from './semconv.js';
import { vercel } from './vercel.js';

/** The instrumentation families, in order of precedence. */
export const CONVENTIONS: readonly Convention[] = [semconv, openinference, vercel, openllmetry, langfuse];

const all = (pick: (c: Convention) => readonly string[] | undefined): string[] => CONVENTIONS.flatMap((c) => pick(c) ?? []);

/** Each column's attribute names, every family's in registry order: the first one present wins. */
export const MODEL_KEYS = all((c) => c.model);
export const PROVIDER_KEYS = all((c) => c.provider);
export const INPUT_TEXT_KEYS = all((c) => c.inputText);
export const OUTPUT_TEXT_KEYS = all((c) => c.outputText);
export const TTFT_KEYS = all((c) => c.ttft);
export const USAGE_KEYS: Record<UsageCount, string[]> = {
  input: all((c) => c.usage?.input),
  output: all((c) => c.usage?.output),
  cacheRead: all((c) => c.usage?.cacheRead),
  cacheWrite: all((c) => c.usage?.cacheWrite),
  reasoning: all((c) => c.usage?.reasoning),
  total: all((c) => c.usage?.total),
  cacheWrite1h: all((c) => c.usage?.cacheWrite1h),
  audioInput: all((c) => c.usage?.audioInput),
  audioOutput: all((c) => c.usage?.audioOutput),
};
export const SERVICE_TIER_KEYS = all((c) => c.serviceTier);
/** The customer, session and trace-name attributes the families define, read after the configured ones. */
export const CUSTOMER_KEYS = all((c) => c.customer);
export const SESSION_KEYS = all((c) => c.session);
export const TRACE_NAME_KEYS = all((c) => c.traceName);

/** Every usage attribute name: left out of metadata unless the span is a wrapper (its counts are kept there). */
export const USAGE_KEY_SET: ReadonlySet<string> = new Set(Object.values(USAGE_KEYS).flat());

/** Attributes whose value lives in a column; they are not repeated in metadata. */
export const CONSUMED: ReadonlySet<string> = new Set([
  ...MODEL_KEYS,
  ...PROVIDER_KEYS,
  ...INPUT_TEXT_KEYS,
  ...OUTPUT_TEXT_KEYS,
  ...TTFT_KEYS,
  ...TRACE_NAME_KEYS,
  ...SERVICE_TIER_KEYS,
  ...all((c) => c.consumed),
]);

for (const k of [...CONSUMED, ...USAGE_KEY_SET, ...CUSTOMER_KEYS, ...SESSION_KEYS, ...all((c) => c.reads)]) slotOf(k);
