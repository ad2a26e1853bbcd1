import type { CliContext, ContextDefaults } from './context.js';
import type { Output } from './output.js';

/** Runs one action with a context, turning failures into one line on stderr and exit code 1. */
export type Runner = (fn: (ctx: CliContext, out: Output) => Promise<void>, defaults?: ContextDefaults) => Promise<void>;
