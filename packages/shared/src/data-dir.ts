import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from './errors.js';

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

/**
 * Checks that this process can write DATA_DIR (created when absent) and what
 * is already in it, before a store opens a file there: a directory owned by
 * another user (a root-owned bind mount under a container's uid 1000) then
 * fails with one line that names the path and the uid to own it, not with
 * SQLite's "unable to open database file".
 */
export function checkDataDir(dir: string, ids: { uid?: number; gid?: number } = { uid: process.getuid?.(), gid: process.getgid?.() }): void {
  const refuse = (p: string, e: unknown) => {
    const code = (e as NodeJS.ErrnoException).code ?? String(e);
    const fix =
      ids.uid === undefined
        ? 'make it writable by this user'
        : `chown -R ${ids.uid}:${ids.gid ?? ids.uid} it (in a container: the host directory mounted on it)`;
    const who = ids.uid === undefined ? 'this user' : `uid ${ids.uid}`;
    return new ConfigError(`DATA_DIR ${p} is not writable by ${who} (${code}): ${fix}, or set DATA_DIR to a directory ${who} can write`);
  };
  try {
    ensurePrivateDir(dir);
  } catch (e) {
    throw refuse(deepestExisting(dir), e);
  }
  for (const p of [dir, ...entries(dir)]) {
    try {
      fs.accessSync(p, fs.constants.W_OK);
    } catch (e) {
      throw refuse(p, e);
    }
  }
}

function entries(dir: string): string[] {
  try {
    return fs.readdirSync(dir).map((name) => path.join(dir, name));
  } catch {
    return [];
  }
}

/** The deepest ancestor that exists is the one that refused the mkdir. */
function deepestExisting(dir: string): string {
  let p = path.resolve(dir);
  while (!fs.existsSync(p) && path.dirname(p) !== p) p = path.dirname(p);
  return p;
}
