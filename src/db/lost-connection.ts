import { setImmediate as nextTurn } from 'node:timers/promises';
import type pg from 'pg';
import type { Log } from '../logger.js';
import { faultFields, isLostConnection } from './errors.js';

/**
 * Run a use case's statements, and once more if their connection was lost: for what may run twice
 * without a second effect, which the caller vouches for. A claim that did not commit claimed nothing;
 * one that committed but whose answer was lost holds jobs under leases nobody has, which expire and
 * hand the jobs on (a delay, never a loss). An ack or renew is matched by its lease token, so its
 * second run finds the first one's outcome. A read reads again.
 *
 * The second run waits one turn of the event loop, so that the pool has heard of the other
 * connections the same termination ended and hands out a fresh one. A connection lost again is
 * answered as any outage is (503 with Retry-After); the line logged says so.
 */
export async function retryOnLostConnection<T>(log: Log, what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!isLostConnection(err)) throw err;
    log.warn(faultFields(err), `${what}: database connection lost; running it again on another`);
    await nextTurn();
    try {
      return await run();
    } catch (again) {
      if (isLostConnection(again)) log.warn(faultFields(again), `${what}: database connection lost again`);
      throw again;
    }
  }
}

/**
 * Run a use case's statements that may not simply run twice, and if their connection was lost, first
 * read back whether they committed: `readBack` answers what the first run did, or undefined if it did
 * not happen, and only then is it run again. For a nack (jobs/nack.ts's receipt): a first run that
 * committed cleared the lease, so a second run alone would answer lease_lost for a nack that
 * happened. A connection lost again, in the read-back or the second run, is answered as an outage.
 */
export async function readBackOnLostConnection<T>(
  log: Log,
  what: string,
  run: () => Promise<T>,
  readBack: () => Promise<T | undefined>,
): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!isLostConnection(err)) throw err;
    log.warn(faultFields(err), `${what}: database connection lost; reading back whether it was done`);
    await nextTurn();
    try {
      return (await readBack()) ?? (await run());
    } catch (again) {
      if (isLostConnection(again)) log.warn(faultFields(again), `${what}: database connection lost again`);
      throw again;
    }
  }
}

/**
 * Ends a pooled connection as soon as one of its statements fails for a lost connection, so the pool
 * discards it when it is released and never hands it out again. Otherwise a terminated backend's
 * connection goes back to the pool as idle: its error reaches the statement before the socket's
 * close reaches node-postgres (the backend sends the error, then cleans up and exits), so the
 * statement's second run (retryOnLostConnection) was handed the same dead connection
 * (test/jobs/lost-connections.test.ts failed so before this).
 */
export function endWhenLost(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const result = query(...args);
    // Registered before the caller's own handler, so the client is ending when the caller releases it.
    if (result instanceof Promise) {
      result.catch((err: unknown) => {
        if (isLostConnection(err)) client.end().catch(() => {});
      });
    }
    return result;
  };
}
