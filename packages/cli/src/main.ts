import { runCli } from './program.js';

export async function main(): Promise<void> {
  process.exitCode = await runCli(process.argv.slice(2), { env: process.env });
}
