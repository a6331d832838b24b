import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PROBLEM_CODES } from '../src/http/problem.js';
import { configTableRows } from './support/config-table.js';

describe('README and its docs pages', () => {
  it('documents every setting of src/config/settings.ts with its default (npm run readme:config rewrites it)', () => {
    const readme = fs.readFileSync('docs/configuration.md', 'utf8');
    const block = readme.slice(
      readme.indexOf('<!-- config-table:start -->'),
      readme.indexOf('<!-- config-table:end -->'),
    );
    // Compare cell by cell so that column padding does not matter.
    const cells = (row: string) => row.split('|').map((c) => c.trim());
    const rows = block.split('\n').filter((l) => l.startsWith('| `'));
    expect(rows.map(cells)).toEqual(configTableRows().map(cells));
  });

  it('lists every problem code with its status', () => {
    const errors = fs.readFileSync('docs/errors.md', 'utf8');
    for (const [code, { status }] of Object.entries(PROBLEM_CODES)) {
      expect(errors, code).toMatch(new RegExp(`\`${code}\`[^(]*\\(${status}`));
    }
  });

  it("shows the libraries' ten-line workers as their READMEs have them (where their tests run them)", () => {
    const readme = fs.readFileSync('README.md', 'utf8');
    const block = (text: string, fence: string) =>
      text.match(new RegExp(`^\`\`\`${fence}\n([\\s\\S]*?)^\`\`\`$`, 'm'))?.[1];
    const shown = (language: string) =>
      block(
        readme.slice(readme.indexOf(`<!-- worker:${language} -->`)),
        language === 'typescript' ? 'ts' : 'python',
      );
    expect(shown('typescript')).toBe(
      block(fs.readFileSync('clients/typescript/README.md', 'utf8'), 'ts worker'),
    );
    expect(shown('python')).toBe(block(fs.readFileSync('clients/python/README.md', 'utf8'), 'python worker'));
    expect(shown('typescript')).toContain('new Worker<');
  });

  it("pins the client generator's recipe to the versions npm test runs it with", () => {
    const readme = fs.readFileSync('docs/workers.md', 'utf8');
    const dev = JSON.parse(fs.readFileSync('package.json', 'utf8')).devDependencies as Record<string, string>;
    expect(readme).toContain(`@hey-api/openapi-ts@${dev['@hey-api/openapi-ts']}`);
    expect(readme).toContain(`typescript@${dev.typescript}`);
    expect(readme).toContain(`zod@${dev.zod!.split('.')[0]}`);
  });
});
