import { PRIVATE_UMASK } from '@trace-ingest/shared/data-dir';
import { runCli } from './program.js';

export async function main(): Promise<void> {
  // Files the CLI writes (the stores it opens, the secrets key, exports) are the user's alone.
  process.umask(PRIVATE_UMASK);
  process.exitCode = await runCli(process.argv.slice(2), { env: process.env });
}
