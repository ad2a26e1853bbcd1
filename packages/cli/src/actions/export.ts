import fs from 'node:fs';
import path from 'node:path';
import { UsageError } from '@trace-ingest/shared/errors';
import { exportWriter, writeExport, type ExportFormat } from '@trace-ingest/store/export';
import type { CliContext } from '../context.js';
import { openSpanAccess } from '../span-access.js';
import { orgIdOf, resolveWindow, type Window } from './usage.js';

export interface ExportInput extends Window {
  org: string;
  format: ExportFormat;
  out: string;
}

/**
 * An org's spans of a window into a file, streamed (through the running
 * server when there is one): memory holds one chunk of rows whatever the
 * window holds. `onProgress(written, total)` after each chunk.
 */
export async function exportSpans(
  ctx: CliContext,
  input: ExportInput,
  onProgress: (written: number, total: number) => void = () => undefined,
): Promise<{ rows: number; file: string; bytes: number }> {
  const window = resolveWindow(input);
  const dir = path.dirname(path.resolve(input.out));
  if (!fs.existsSync(dir)) throw new UsageError(`--out: the folder ${dir} does not exist`);
  const access = await openSpanAccess(ctx);
  const orgId = await orgIdOf(ctx, input.org);
  const { total, rows } = await access.exportRows({ orgId, ...window });
  const written = await writeExport(rows, exportWriter(input.format, input.out), (n) => onProgress(n, total));
  return { rows: written, file: path.resolve(input.out), bytes: fs.statSync(input.out).size };
}
