import { Worker, type WorkerOptions } from '../src/index.js';

/** A log line of the library, as the logger hook received it. */
export interface LoggedEvent {
  level: string;
  event: string;
  [field: string]: unknown;
}

/**
 * A Worker running in the test's process (no signal handlers), its events collected in memory.
 * `done` is run()'s promise; `stop()` drains it.
 */
export function runWorker<P>(options: WorkerOptions<P>) {
  const events: LoggedEvent[] = [];
  const worker = new Worker<P>({
    handleSignals: false,
    logger: (level, event, fields) => events.push({ level, event, ...fields }),
    ...options,
  });
  const done = worker.run();
  return {
    worker,
    events,
    done,
    stop: () => worker.stop(),
    /** The events named `event`. */
    named: (event: string) => events.filter((e) => e.event === event),
  };
}
