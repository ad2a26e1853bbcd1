import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';

/** One versioned schema change of a span store: a file `NNNN_name.sql` of `migrations/<store>/`. */
export interface MigrationFile {
  /** The file name without `.sql`, e.g. `0001_spans`. */
  version: string;
  /** sha256 of the file's text: a file changed after it was applied is reported, not applied again. */
  checksum: string;
  statements: string[];
}

/** Splits a migration file into statements: `;` at a line's end ends one; `--` lines are dropped. */
export function splitStatements(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('--'))
    .join('\n')
    .split(/;[ \t]*(?:\r?\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The migrations of `dir`, in version order. */
export async function loadMigrationFiles(dir: URL): Promise<MigrationFile[]> {
  const files = (await fs.readdir(dir)).filter((f) => /^\d+_[A-Za-z0-9_]+\.sql$/.test(f)).sort();
  const out: MigrationFile[] = [];
  for (const file of files) {
    const text = await fs.readFile(new URL(file, dir), 'utf8');
    out.push({ version: file.slice(0, -4), checksum: createHash('sha256').update(text).digest('hex'), statements: splitStatements(text) });
  }
  return out;
}
