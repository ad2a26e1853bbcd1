// Writes docs/openapi.json from the zod schemas (run by `npm run openapi`).
import fs from 'node:fs';
import { buildOpenApiDocument } from '../packages/shared/dist/openapi.js';

const file = new URL('../docs/openapi.json', import.meta.url);
fs.writeFileSync(file, JSON.stringify(buildOpenApiDocument(), null, 2) + '\n');
console.log(`wrote ${file.pathname}`);
