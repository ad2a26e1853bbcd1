import { validateContentPolicy, parseContentPolicy, serializeContentPolicy, type BuiltinRule, type ContentPolicy } from '@trace-ingest/shared/content-policy';
import { UsageError } from '@trace-ingest/shared/errors';
import type { EraseCounts, EraseKind } from '@trace-ingest/shared/lifecycle';
import type { AuditEntry, Org } from '@trace-ingest/store/control-store-types';
import { UnknownNameError } from '@trace-ingest/store/control-store';
import type { CliContext } from '../context.js';
import { currentActor, openSpanAccess } from '../span-access.js';
import { withBudgets } from './budgets.js';

export { currentActor };

async function requireOrg(ctx: CliContext, org: string): Promise<Org> {
  const o = await (await ctx.keys()).getOrg(org);
  if (o === null) throw new UnknownNameError('org', org);
  return o;
}

/** `days` and `textDays`: a number of days (0 keeps forever), or null for the install's default. */
export async function setRetention(
  ctx: CliContext,
  input: { org: string; days?: number | null | undefined; textDays?: number | null | undefined; actor?: string },
): Promise<Org> {
  if (input.days === undefined && input.textDays === undefined) throw new UsageError('give --days, --text-days or both');
  const keys = await ctx.keys();
  const org = await keys.setOrgRetention(input.org, {
    ...(input.days === undefined ? {} : { days: input.days }),
    ...(input.textDays === undefined ? {} : { textDays: input.textDays }),
  });
  await keys.appendAudit({
    actor: input.actor ?? currentActor(),
    action: 'set-retention',
    orgId: org.id,
    target: '',
    detail: JSON.stringify({ days: org.retentionDays, textDays: org.textDays }),
  });
  return org;
}

export interface PolicyInput {
  org: string;
  record?: 'full' | 'no-text' | undefined;
  /** Built-in rules by name. */
  redact?: readonly string[] | undefined;
  /** The org's own rules as `pattern=>replacement` (the pattern a JavaScript regular expression, `/pattern/i=>...` for flags). */
  rules?: readonly string[] | undefined;
  /** Back to recording everything as sent. */
  clear?: boolean | undefined;
  actor?: string;
}

function parseRule(s: string): { pattern: string; flags: string; replacement: string } {
  const at = s.lastIndexOf('=>');
  if (at <= 0) throw new UsageError(`--rule ${JSON.stringify(s)}: write it as <regex>=><replacement>, e.g. 'order-[0-9]+=>[order]'`);
  const left = s.slice(0, at);
  const replacement = s.slice(at + 2);
  const slashed = /^\/(.+)\/([imsu]*)$/.exec(left);
  return slashed === null ? { pattern: left, flags: '', replacement } : { pattern: slashed[1] ?? '', flags: slashed[2] ?? '', replacement };
}

/** Sets the org's content policy: the options given replace those parts of the stored policy. */
export async function setContentPolicy(ctx: CliContext, input: PolicyInput): Promise<{ org: string; policy: ContentPolicy }> {
  const keys = await ctx.keys();
  const org = await requireOrg(ctx, input.org);
  let policy: ContentPolicy | null;
  if (input.clear === true) policy = null;
  else {
    const now = parseContentPolicy(org.contentPolicy);
    policy = validateContentPolicy({
      record: input.record ?? now.record,
      rules: (input.redact ?? now.rules).filter((r) => r !== '') as BuiltinRule[],
      custom: input.rules === undefined ? now.custom : input.rules.map(parseRule),
    });
  }
  const json = policy === null || (policy.record === 'full' && policy.rules.length === 0 && policy.custom.length === 0) ? null : serializeContentPolicy(policy);
  await keys.setOrgContentPolicy(org.name, json);
  const shown = parseContentPolicy(json);
  // The rules' patterns are the operator's and may be sensitive themselves: the log keeps their count.
  await keys.appendAudit({
    actor: input.actor ?? currentActor(),
    action: 'set-content-policy',
    orgId: org.id,
    target: '',
    detail: JSON.stringify({ record: shown.record, rules: shown.rules, customRules: shown.custom.length }),
  });
  return { org: org.name, policy: shown };
}

export interface EraseInput {
  org: string;
  kind: EraseKind;
  id: string;
  dryRun: boolean;
  actor?: string;
}

/**
 * Erases a customer's, trace's or session's data and records it: through the
 * running server when there is one (it writes the audit entry, and forgets
 * what it holds of the customer), else on the store the CLI opens. A
 * customer's erasure also reaches the control store: its alerts (figures and
 * delivery records), its own budget and its id in keys limited to named
 * customers, after its spans, so no budget check
 * finds them again afterwards.
 */
export async function erase(ctx: CliContext, input: EraseInput): Promise<EraseCounts & { controlRows: number; dryRun: boolean; org: string }> {
  const org = await requireOrg(ctx, input.org);
  const access = await openSpanAccess(ctx, { preferServer: true });
  const counts = await access.erase(org.id, { kind: input.kind, id: input.id }, input.dryRun, input.actor ?? currentActor());
  const control = input.kind === 'customer' ? await withBudgets(ctx, (b) => b.eraseCustomer(org.id, input.id, input.dryRun)) : { controlRows: 0 };
  return { ...counts, ...control, dryRun: input.dryRun, org: org.name };
}

export interface AuditRow {
  at: string;
  actor: string;
  action: string;
  org: string;
  target: string;
  detail: string;
}

export async function auditList(ctx: CliContext, input: { org?: string | undefined; limit?: number | undefined }): Promise<AuditRow[]> {
  const keys = await ctx.keys();
  const orgId = input.org === undefined ? undefined : (await requireOrg(ctx, input.org)).id;
  const names = new Map((await keys.listOrgs()).map((o) => [o.id, o.name]));
  const entries: AuditEntry[] = await keys.listAudit({
    ...(orgId === undefined ? {} : { orgId }),
    ...(input.limit === undefined ? {} : { limit: input.limit }),
  });
  return entries.map((e) => ({
    at: new Date(e.at).toISOString(),
    actor: e.actor,
    action: e.action,
    org: names.get(e.orgId) ?? e.orgId,
    target: e.target,
    detail: e.detail,
  }));
}
