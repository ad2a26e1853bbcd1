import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, onTestFinished } from 'vitest';
import { SqliteControlStore } from './control-store-sqlite.js';
import { controlStoreContract } from './control-store.contract.js';

describe('control store on SQLite', () => {
  controlStoreContract(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-keys-'));
    const store = new SqliteControlStore(path.join(dir, 'k.sqlite'));
    onTestFinished(async () => {
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });
    await store.start();
    return store;
  });
});
