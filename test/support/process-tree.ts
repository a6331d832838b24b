import fs from 'node:fs';

/** Every live descendant of `pid` (Linux /proc), children before grandchildren. */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.shift()!;
    let tasks: string[] = [];
    try {
      tasks = fs.readdirSync(`/proc/${parent}/task`);
    } catch {
      continue; // gone meanwhile
    }
    for (const task of tasks) {
      const children = fs
        .readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
      out.push(...children);
      queue.push(...children);
    }
  }
  return out;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
