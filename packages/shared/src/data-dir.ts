import fs from 'node:fs';

/**
 * DATA_DIR holds the key store, the span store (prompts and outputs), the
 * write log, dead letters and the secrets key: it is the server user's
 * alone. Processes of the product create files 0600 and folders 0700 (their
 * entry points set umask 077, so files made by SQLite and DuckDB are private
 * too), and DATA_DIR is made 0700.
 */
export const PRIVATE_UMASK = 0o077;

/** Makes `dir` (0700) when it is missing; an existing one keeps its mode (doctor and the server's log say when it is open). */
export function ensurePrivateDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/** The permission bits other users (group or others) have on a path, 0 when none. */
export function openToOthers(mode: number): number {
  return mode & 0o077;
}

/** `rwxr-xr-x` style text of a mode's permission bits. */
export function modeText(mode: number): string {
  const bits = 'rwxrwxrwx';
  return [...bits].map((c, i) => ((mode >> (8 - i)) & 1 ? c : '-')).join('');
}
