import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The server binary, beside this package in the workspace (and in the image). */
export const SERVER_BIN = fileURLToPath(new URL('../../../server/bin/trace-ingest-server.js', import.meta.url));

/**
 * Runs the server as a child process with this environment and forwards
 * SIGTERM/SIGINT to it, so a drain behaves exactly as with the server run
 * directly. Resolves with its exit code.
 */
export function serve(env: Record<string, string | undefined>, extraNodeArgs: readonly string[] = []): Promise<number> {
  const child = spawn(process.execPath, [...extraNodeArgs, SERVER_BIN], { env, stdio: 'inherit' });
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  const onTerm = forward('SIGTERM');
  const onInt = forward('SIGINT');
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      resolve(code ?? (signal === null ? 1 : 128));
    });
  });
}
