import { type ChildProcess, spawn } from 'node:child_process';

/** An example worker run as a process, with the JSON lines it prints on stdout parsed as events. */
export interface WorkerProcess {
  child: ChildProcess;
  events: Record<string, any>[];
  exited: Promise<number | null>;
}

export function startWorker(command: string, args: string[], env: Record<string, string>): WorkerProcess {
  const child = spawn(command, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const events: Record<string, any>[] = [];
  let buffer = '';
  child.stdout!.on('data', (chunk) => {
    buffer += chunk;
    const lines = buffer.split('\n');
    buffer = lines.pop()!;
    for (const line of lines) {
      if (!line.trim()) continue;
      // A line that is not JSON (two events written into one, say) is an event too, for tests to refuse.
      try {
        events.push(JSON.parse(line));
      } catch {
        events.push({ event: 'not_json', line });
      }
    }
  });
  // 'close', not 'exit': it comes after the child's stdout has been read to its end, so a test that
  // awaits `exited` sees every event the worker wrote before it went.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, events, exited };
}
