import { z } from 'zod';
import { UsageError } from './errors.js';
import type { Span, Trace } from './schema.js';

/**
 * An org's content policy, applied at ingest before a batch reaches the
 * write log (so no file of the service ever holds what it removes): either
 * no texts at all, or redaction rules (a regex and its replacement) run over
 * every span text and every metadata value. Rules are the operator's; the
 * built-ins are written without nested quantifiers, so their cost stays
 * linear in the text.
 */

export type RecordMode = 'full' | 'no-text';

export const BUILTIN_RULES = {
  email: { pattern: String.raw`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`, flags: '', replacement: '[email]' },
  // 13 to 19 digits, in groups split by a space or dash; kept only when the digits pass the Luhn check.
  card: { pattern: String.raw`\b\d(?:[ -]?\d){12,18}\b`, flags: '', replacement: '[card]' },
  'api-key': {
    pattern:
      String.raw`\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|\bti_[A-Za-z0-9_-]{20,}|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{36,}|\bAIza[0-9A-Za-z_-]{35}` +
      String.raw`|\bxox[abpr]-[A-Za-z0-9-]{10,}|\b[Bb]earer [A-Za-z0-9._~+/-]{16,}=*`,
    flags: '',
    replacement: '[api-key]',
  },
} as const;
export type BuiltinRule = keyof typeof BUILTIN_RULES;
const BUILTIN_NAMES = Object.keys(BUILTIN_RULES) as [BuiltinRule, ...BuiltinRule[]];

export interface RedactionRule {
  pattern: string;
  flags?: string | undefined;
  replacement: string;
}

export interface ContentPolicy {
  record: RecordMode;
  /** Built-in rules by name, applied first, in BUILTIN_RULES' order. */
  rules: readonly BuiltinRule[];
  /** The org's own rules, applied after the built-ins, in order. */
  custom: readonly RedactionRule[];
}

export const DEFAULT_CONTENT_POLICY: ContentPolicy = { record: 'full', rules: [], custom: [] };

const MAX_CUSTOM_RULES = 20;
const MAX_PATTERN_CHARS = 500;

const PolicySchema = z.strictObject({
  record: z.enum(['full', 'no-text']).default('full'),
  rules: z.array(z.enum(BUILTIN_NAMES)).max(BUILTIN_NAMES.length).default([]),
  custom: z
    .array(
      z.strictObject({
        pattern: z.string().min(1).max(MAX_PATTERN_CHARS),
        flags: z
          .string()
          .regex(/^[imsu]*$/, { message: 'flags may only be i, m, s and u' })
          .optional(),
        replacement: z.string().max(200),
      }),
    )
    .max(MAX_CUSTOM_RULES)
    .default([]),
});

/** A policy as given (CLI, stored JSON), checked: every pattern must compile. Throws UsageError saying what to fix. */
export function validateContentPolicy(p: unknown): ContentPolicy {
  const r = PolicySchema.safeParse(p);
  if (!r.success) throw new UsageError(`content policy: ${r.error.issues.map((i) => `${i.path.join('.') || 'policy'}: ${i.message}`).join('; ')}`);
  r.data.custom.forEach((rule, i) => {
    try {
      new RegExp(rule.pattern, `${rule.flags ?? ''}g`);
    } catch (e) {
      throw new UsageError(`content policy: rule ${i + 1} (${JSON.stringify(rule.pattern)}) is not a valid regular expression: ${(e as Error).message}`);
    }
  });
  return { record: r.data.record, rules: BUILTIN_NAMES.filter((n) => r.data.rules.includes(n)), custom: r.data.custom };
}

export function parseContentPolicy(json: string | null | undefined): ContentPolicy {
  if (json === null || json === undefined || json === '') return DEFAULT_CONTENT_POLICY;
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (e) {
    throw new UsageError(`content policy is not JSON: ${(e as Error).message}`);
  }
  return validateContentPolicy(raw);
}

export function serializeContentPolicy(p: ContentPolicy): string {
  return JSON.stringify({
    record: p.record,
    rules: p.rules,
    custom: p.custom.map((c) => ({ pattern: c.pattern, flags: c.flags ?? '', replacement: c.replacement })),
  });
}

export interface CompiledPolicy {
  /** False for the default policy: `apply` then returns its input as is. */
  readonly active: boolean;
  /** The trace as it may be written: a new object when anything applies; the input is never changed. */
  apply<T extends Trace>(trace: T): T;
}

type Redactor = (s: string) => string;

function luhn(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

function redactor(name: BuiltinRule | undefined, rule: RedactionRule): Redactor {
  const re = new RegExp(rule.pattern, `${rule.flags ?? ''}g`);
  if (name === 'email') return (s) => (s.includes('@') ? s.replace(re, rule.replacement) : s);
  if (name === 'card') {
    const digit = /\d/;
    return (s) => (digit.test(s) ? s.replace(re, (m) => (luhn(m.replace(/[ -]/g, '')) ? rule.replacement : m)) : s);
  }
  return (s) => s.replace(re, rule.replacement);
}

const SPAN_TEXTS = ['input', 'output', 'toolCatalog', 'sources', 'safetyMetadata'] as const;

export function compileContentPolicy(p: ContentPolicy): CompiledPolicy {
  const redactors: Redactor[] = [...p.rules.map((n) => redactor(n, BUILTIN_RULES[n])), ...p.custom.map((c) => redactor(undefined, c))];
  const noText = p.record === 'no-text';
  if (!noText && redactors.length === 0) return { active: false, apply: (t) => t };
  const redact = (s: string | undefined): string | undefined => {
    if (s === undefined || s === '') return s;
    let out = s;
    for (const r of redactors) out = r(out);
    return out;
  };
  const meta = (m: Record<string, string> | undefined): Record<string, string> | undefined =>
    m === undefined ? m : Object.fromEntries(Object.entries(m).map(([k, v]) => [k, redact(v) ?? '']));
  const span = (s: Span): Span => {
    const out: Span = { ...s };
    for (const k of SPAN_TEXTS) {
      if (out[k] === undefined) continue;
      if (noText) delete out[k];
      else out[k] = redact(out[k]);
    }
    if (out.errorMessage !== undefined) out.errorMessage = redact(out.errorMessage);
    if (out.metadata !== undefined) out.metadata = meta(out.metadata);
    return out;
  };
  return {
    active: true,
    apply: <T extends Trace>(t: T): T => ({ ...t, ...(t.metadata === undefined ? {} : { metadata: meta(t.metadata) }), spans: t.spans.map(span) }),
  };
}

const compiled = new Map<string, CompiledPolicy>();
const INACTIVE = compileContentPolicy(DEFAULT_CONTENT_POLICY);

/** The compiled policy of a stored JSON, memoised (at most 256 policies), so the hot path compiles each policy once. */
export function compiledPolicyFor(json: string | null | undefined): CompiledPolicy {
  if (json === null || json === undefined || json === '') return INACTIVE;
  let p = compiled.get(json);
  if (p === undefined) {
    p = compileContentPolicy(parseContentPolicy(json));
    if (compiled.size >= 256) compiled.delete(compiled.keys().next().value as string);
    compiled.set(json, p);
  }
  return p;
}
