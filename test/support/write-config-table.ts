import fs from 'node:fs';
import { configTableRows } from './config-table.js';

/** `npm run readme:config`: rewrite docs/configuration.md's table from src/config/settings.ts. */
const START = '<!-- config-table:start -->';
const END = '<!-- config-table:end -->';
const readme = fs.readFileSync('docs/configuration.md', 'utf8');
const table = [
  '| Variable | Default | Unit | Meaning |',
  '| --- | --- | --- | --- |',
  ...configTableRows(),
].join('\n');
const before = readme.slice(0, readme.indexOf(START) + START.length);
const after = readme.slice(readme.indexOf(END));
fs.writeFileSync('docs/configuration.md', `${before}\n${table}\n${after}`);
