import fs from 'node:fs/promises';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { typesFromDocument } from './types.js';

/**
 * `npm run openapi`: write the OpenAPI document the app serves to openapi/openapi.json, and the
 * TypeScript types of a client generated from it to openapi/schema.d.ts and to the TypeScript
 * library's clients/typescript/src/schema.ts (the Python library's types are written by
 * clients/python/generate_schema.py). No database is needed:
 * the app is built, asked for its document, and closed without serving a request.
 */
const config = loadConfig({ LOG_LEVEL: 'silent', BATON_MAINTENANCE: 'false' });
const app = await buildApp({ config, databaseUrl: 'postgres://openapi@127.0.0.1:1/none' });
await app.ready();
const document = app.swagger();
await app.close();
await fs.writeFile(new URL('./openapi.json', import.meta.url), `${JSON.stringify(document, null, 2)}\n`);
const types = await typesFromDocument(document);
await fs.writeFile(new URL('./schema.d.ts', import.meta.url), types);
await fs.writeFile(new URL('../clients/typescript/src/schema.ts', import.meta.url), types);
console.log('wrote openapi/openapi.json, openapi/schema.d.ts and clients/typescript/src/schema.ts');
