// Lists every tracked source line longer than the printWidth in .prettierrc.json. Prettier leaves
// long string literals, template literals and comments as they are, so those have to be split by hand.
// Prints `file:line: N characters` for each and exits 1 if there is any (run by `npm test`).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { printWidth = 80 } = JSON.parse(fs.readFileSync(path.join(root, '.prettierrc.json'), 'utf8'));

const EXTENSIONS = ['.ts', '.js', '.mjs', '.css', '.html'];
const EXCLUDED_DIRS = ['test/fixtures/', 'packages/sdk/test/fixtures/', 'test/fuzz/corpus/', 'packages/server/proto/'];
const EXCLUDED_SEGMENTS = ['dist', 'node_modules'];

const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  .split('\0')
  .filter((file) => file !== '')
  .filter((file) => EXTENSIONS.includes(path.extname(file)))
  .filter((file) => !EXCLUDED_DIRS.some((dir) => file.startsWith(dir)))
  .filter((file) => !file.split('/').some((segment) => EXCLUDED_SEGMENTS.includes(segment)));

let found = 0;
for (const file of files) {
  const full = path.join(root, file);
  if (!fs.existsSync(full)) continue; // deleted in the work tree but not yet in the index
  const lines = fs.readFileSync(full, 'utf8').split('\n');
  lines.forEach((line, i) => {
    // Characters, not UTF-16 units, so that "→" or "µ" count once.
    const length = [...line.replace(/\r$/, '')].length;
    if (length > printWidth) {
      console.log(`${file}:${i + 1}: ${length} characters`);
      found++;
    }
  });
}
process.exit(found > 0 ? 1 : 0);
