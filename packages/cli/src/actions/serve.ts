import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { onShutdownSignals } from '@trace-ingest/shared/signals';

/** The server binary, beside this package in the workspace (and in the image). */
export const SERVER_BIN = fileURLToPath(new URL('../../../server/bin/trace-ingest-server.js', import.meta.url));

/**
 * Runs the server as a child process with this environment and forwards
 * SIGTERM/SIGINT to it, so a drain behaves exactly as with the server run
 * directly (`kill <pid>` from a process manager reaches the server through
 * this). Forwarded once per signal event: a signal sent to the process group
 * reaches this process (often twice, with npm's copy) and the server
 * directly; the server takes the copies as one event. When this process
 * dies without forwarding anything (SIGKILL), the server stops by itself.
 * Resolves with its exit code.
 */
export function serve(env: Record<string, string | undefined>, extraNodeArgs: readonly string[] = []): Promise<number> {
  // The IPC channel is the server's tie to this process: it closes when this process dies however it dies
  // (SIGKILL included), and the server then stops instead of holding the port and DATA_DIR as an orphan.
  const child = spawn(process.execPath, [...extraNodeArgs, SERVER_BIN], { env, stdio: ['inherit', 'inherit', 'inherit', 'ipc'] });
  child.channel?.unref();
  const forward = (sig: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
  };
  const stopListening = onShutdownSignals({ first: forward, again: forward });
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      stopListening();
      resolve(code ?? (signal === null ? 1 : 128));
    });
  });
}
