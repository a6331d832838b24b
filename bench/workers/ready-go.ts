import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

/**
 * A worker process under measurement: started with its settings in the environment, it prints
 * `ready` once it has loaded and connected nothing yet, and starts working when it reads a line on
 * stdin. So a process's start-up (Node loading TypeScript, Python importing) is never timed, and
 * every worker kind starts from the same point. Stopped with SIGTERM, as a deployment stops it.
 */
export class MeasuredWorker {
  private constructor(private readonly child: ChildProcess) {}

  static async start(command: string, args: string[], env: Record<string, string>): Promise<MeasuredWorker> {
    const child = spawn(command, args, {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout! });
    const ready = new Promise<void>((resolve, reject) => {
      lines.on('line', (line) => {
        if (line.trim() === 'ready') resolve();
      });
      child.once('exit', (code) =>
        reject(new Error(`${command} ${args.join(' ')} exited (${code}) before ready`)),
      );
    });
    await ready;
    return new MeasuredWorker(child);
  }

  get pid(): number {
    return this.child.pid!;
  }

  go(): void {
    this.child.stdin!.write('go\n');
  }

  /** SIGTERM, and wait for the exit (a drain with nothing in hand is immediate). */
  async stop(): Promise<number | null> {
    if (this.child.exitCode !== null) return this.child.exitCode;
    const exited = once(this.child, 'exit');
    this.child.kill('SIGTERM');
    const [code] = await exited;
    return code as number | null;
  }
}
