import { AlreadyExistsError, AmbiguousKeyError, UnknownNameError } from '@trace-ingest/store/control-store';

/** What to run next, added to a store error the CLI prints; the stores say only what is wrong. */
export function cliHint(e: unknown): string | undefined {
  if (e instanceof UnknownNameError) return `see "trace-ingest ${e.what}s list"`;
  if (e instanceof AmbiguousKeyError) return 'revoke by id instead';
  if (e instanceof AlreadyExistsError && e.what === 'plan') return 'use "plans update" to change it';
  return undefined;
}

/** The one line printed for a failed command. */
export function failureLine(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const hint = cliHint(e);
  return `trace-ingest: ${message}${hint === undefined ? '' : `; ${hint}`}`;
}
