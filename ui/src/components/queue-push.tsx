import { ApiError, must, type Queue } from '../api.js';
import { REFRESH_MS } from '../config.js';
import { period, time } from '../format.js';
import { usePoll } from '../hooks.js';
import { useSession } from '../session.js';
import { ErrorLine, Facts } from './bits.js';

/**
 * A push queue's endpoint (GET /v1/queues/{queue}/push, docs/push.md): where Baton POSTs its jobs,
 * the timeout and concurrency, and when its signing secret was made (never the secret). Shown to
 * keys that may act (reading an endpoint needs the admin scope), on push queues only (the queue's
 * `push`), so no other queue's page asks for an endpoint it does not have.
 */
export function Push({ queue }: { queue: Queue }) {
  const { api, canAct } = useSession();
  const push = usePoll(
    async (signal) => {
      if (!canAct || !queue.push) return null;
      try {
        return await must(
          api.GET('/v1/queues/{queue}/push', { params: { path: { queue: queue.name } }, signal }),
        );
      } catch (err) {
        // Not a push queue, or a key limited to other queues' settings: nothing to show.
        if (err instanceof ApiError && (err.status === 404 || err.status === 403)) return null;
        throw err;
      }
    },
    REFRESH_MS,
    [api, queue.name, canAct, queue.push],
  );
  const p = push.data;
  if (!p) return push.error ? <ErrorLine error={push.error} /> : null;
  return (
    <section aria-labelledby="push-title">
      <h2 id="push-title">Push delivery</h2>
      <p>Baton POSTs each job of this queue to its endpoint and acks or nacks it by the answer.</p>
      <Facts
        look="settings"
        rows={[
          ['Endpoint', <code key="url">{p.url}</code>],
          ['Timeout', period(p.timeout_ms)],
          ['Concurrency', `${p.concurrency} per replica`],
          ['Signing secret made', time(p.secret_created_at)],
          [
            'Previous secret signs until',
            p.previous_secret_until ? time(p.previous_secret_until) : 'no rotation under way',
          ],
          ['Push since', time(p.created_at)],
        ]}
      />
    </section>
  );
}
