import fs from 'node:fs';
import path from 'node:path';
import { UsageError } from '@trace-ingest/shared/errors';
import { UnknownNameError } from '@trace-ingest/store/control-store';
import { exportWriter, focusWriter, writeExport, type ExportFormat, type ExportWriter, type FocusFileType } from '@trace-ingest/store/export';
import type { CliContext } from '../context.js';
import { openSpanAccess } from '../span-access.js';
import { resolveWindow, type Window } from './usage.js';

export interface ExportInput extends Window {
  org: string;
  /** `focus`: FOCUS chargeback rows, CSV or Parquet by the file's extension. */
  format: ExportFormat | 'focus';
  out: string;
}

/** A FOCUS file's type from its name: .csv or .parquet. */
export function focusFileType(out: string): FocusFileType {
  const ext = path.extname(out).toLowerCase();
  if (ext === '.csv' || ext === '.parquet') return ext.slice(1) as FocusFileType;
  throw new UsageError(`--out: a FOCUS file is written as CSV or Parquet: name it .csv or .parquet (got ${JSON.stringify(path.basename(out))})`);
}

/**
 * An org's spans of a window into a file, streamed (through the running
 * server when there is one): memory holds one chunk of rows whatever the
 * window holds; or its FOCUS chargeback rows. `onProgress(written, total)`
 * after each chunk (total 0 when not known ahead).
 */
export async function exportSpans(
  ctx: CliContext,
  input: ExportInput,
  onProgress: (written: number, total: number) => void = () => undefined,
): Promise<{ rows: number; file: string; bytes: number }> {
  const window = resolveWindow(input);
  const dir = path.dirname(path.resolve(input.out));
  if (!fs.existsSync(dir)) throw new UsageError(`--out: the folder ${dir} does not exist`);
  const fileType = input.format === 'focus' ? focusFileType(input.out) : undefined;
  const access = await openSpanAccess(ctx);
  const org = await (await ctx.keys()).getOrg(input.org);
  if (org === null) throw new UnknownNameError('org', input.org);
  let source: { total: number; rows: AsyncIterable<Buffer> };
  let writer: ExportWriter;
  if (input.format === 'focus') {
    source = await access.focusRows({ orgId: org.id, orgName: org.name, ...window });
    writer = focusWriter(fileType ?? 'csv', input.out);
  } else {
    source = await access.exportRows({ orgId: org.id, ...window });
    writer = exportWriter(input.format, input.out);
  }
  const { total, rows } = source;
  const written = await writeExport(rows, writer, (n) => onProgress(n, total));
  return { rows: written, file: path.resolve(input.out), bytes: fs.statSync(input.out).size };
}
