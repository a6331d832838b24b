import { type ChildProcess, spawn } from 'node:child_process';

export interface ServerProcessOptions {
  /**
   * How to launch it: `node` runs src/server.ts on the project's Node; `npm` runs `npm start`, as a
   * person or a process manager would, so the PID we hold (and signal) is npm's.
   */
  via?: 'node' | 'npm';
  host?: string;
}

/** A real Baton server process, for signal and crash tests. */
export class ServerProcess {
  readonly exited: Promise<number | null>;
  output = '';
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
  ) {
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  }

  static async start(
    env: Record<string, string>,
    port: number,
    opts: ServerProcessOptions = {},
  ): Promise<ServerProcess> {
    const host = opts.host ?? '127.0.0.1';
    const [command, args] =
      opts.via === 'npm' ? ['npm', ['start']] : [process.execPath, ['--import', 'tsx', 'src/server.ts']];
    const child = spawn(command, args, {
      env: { ...process.env, LOG_LEVEL: 'warn', ...env, PORT: String(port), HOST: host },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const server = new ServerProcess(child, `http://${host}:${port}`);
    child.stdout!.on('data', (c) => {
      server.output += c;
    });
    child.stderr!.on('data', (c) => {
      server.output += c;
    });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`server exited during start:\n${server.output}`);
      const ready = await fetch(`${server.url}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) return server;
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill('SIGKILL');
    throw new Error(`server did not become ready:\n${server.output}`);
  }

  signal(sig: NodeJS.Signals): void {
    this.child.kill(sig);
  }
}
