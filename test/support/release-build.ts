import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const repo = process.cwd();

/**
 * A release's production build in a folder of its own, as the image builds it (the compiled server
 * bundled into dist/baton.mjs, the dashboard in dist/ui), with this checkout's node_modules.
 * `commit` takes that commit's tree from git (`git archive`); without it, this checkout's.
 */
export async function buildRelease(dir: string, commit?: string): Promise<string> {
  await fs.mkdir(dir, { recursive: true });
  if (commit) {
    const archive = path.join(dir, '..', `${path.basename(dir)}.tar`);
    await run('git', ['archive', '--format=tar', '-o', archive, commit], { cwd: repo });
    await run('tar', ['-xf', archive, '-C', dir]);
    await fs.rm(archive);
  } else {
    await fs.copyFile(path.join(repo, 'package.json'), path.join(dir, 'package.json'));
  }
  await fs.symlink(path.join(repo, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  const source = commit ? dir : repo;
  const dist = path.join(dir, 'dist');
  const tsc = path.join(repo, 'node_modules/typescript/bin/tsc');
  await Promise.all([
    run(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', dist], { cwd: source }).then(() =>
      run(process.execPath, ['--import', 'tsx', 'scripts/bundle-server.ts', dist], { cwd: source }),
    ),
    run(process.execPath, ['--import', 'tsx', 'ui/build.ts', path.join(dist, 'ui')], { cwd: source }),
  ]);
  return dir;
}

/** The releases CHANGELOG.md names, newest first: each heading `## <version> (<date>, commit <hash>)`. */
export async function releases(): Promise<{ version: string; commit: string }[]> {
  const text = await fs.readFile(path.join(repo, 'CHANGELOG.md'), 'utf8');
  return [...text.matchAll(/^## (\d+\.\d+\.\d+) \(\d{4}-\d{2}-\d{2}, commit ([0-9a-f]{7,40})\)$/gm)].map(
    (m) => ({
      version: m[1]!,
      commit: m[2]!,
    }),
  );
}
