import { type BatonClient, must, type Queue } from '../api.js';
import { REFRESH_MS } from '../config.js';
import { count, plural, time } from '../format.js';
import { usePoll } from '../hooks.js';
import { href } from '../router.js';
import { useSession } from '../session.js';
import { type Action, useActions } from './actions.js';
import { ErrorLine, Scroll } from './bits.js';

type MoveList = Awaited<ReturnType<typeof readMoves>>;

const readMoves = (api: BatonClient, queue: string, signal: AbortSignal) =>
  must(api.GET('/v1/queues/{queue}/moves', { params: { path: { queue } }, signal }));

/**
 * A dead-letter queue's way back (GET and POST /v1/queues/{queue}/moves): which queues send their
 * dead jobs here, a button that sends the ready ones back to where each died, and the moves of the
 * last 14 days with how far each got. Shown on a dead-letter queue, or on any queue that has had a
 * move; re-read every REFRESH_MS while a move runs, and right after one starts.
 */
export function Moves({ queue, onMoved }: { queue: Queue; onMoved: () => void }) {
  const { api, canAct } = useSession();
  const list = usePoll((signal) => readMoves(api, queue.name, signal), REFRESH_MS, [api, queue.name]);
  const run = useActions(() => {
    list.reload();
    onMoved();
  });
  const data = list.data;
  if (!data || (data.dead_letter_sources.length === 0 && data.moves.length === 0)) {
    return list.error ? <ErrorLine error={list.error} /> : null;
  }
  const sources = data.dead_letter_sources;
  return (
    <section aria-labelledby="moves-title">
      <h2 id="moves-title">Dead letters</h2>
      {sources.length > 0 && (
        <p>
          The dead-letter queue of{' '}
          {sources.map((s, i) => (
            <span key={s}>
              {i > 0 && ', '}
              <a href={href('/queues', s)}>{s}</a>
            </span>
          ))}
          : their dead jobs wait here, ready, for someone to look at them.
        </p>
      )}
      <ErrorLine error={list.error} />
      {canAct && sources.length > 0 && (
        <div class="actions">
          <div class="buttons">{run.button(sendBack(api, queue, data))}</div>
          {run.status}
        </div>
      )}
      {data.moves.length > 0 && (
        <Scroll label="Moves">
          <table>
            <caption class="visually-hidden">{`Moves of ${queue.name}, the latest first`}</caption>
            <thead>
              <tr>
                <th scope="col">Started</th>
                <th scope="col">To</th>
                <th scope="col">Status</th>
                <th scope="col" class="num">
                  Moved
                </th>
                <th scope="col">Finished</th>
              </tr>
            </thead>
            <tbody>
              {data.moves.map((m) => (
                <tr key={m.id}>
                  <th scope="row">{time(m.started_at)}</th>
                  <td>{m.destination ?? 'where each died'}</td>
                  <td class="wraps">
                    {m.status}
                    {m.failure_reason && <span class="muted">: {m.failure_reason}</span>}
                  </td>
                  <td class="num">
                    {count(m.moved)} of {count(m.to_move)}
                  </td>
                  <td>{m.finished_at ? time(m.finished_at) : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      {run.dialog}
    </section>
  );
}

function sendBack(api: BatonClient, q: Queue, data: MoveList): Action {
  const running = data.moves.find((m) => m.status === 'running');
  const counted = q.stats.live_refreshed_at ? ` (as counted at ${time(q.stats.live_refreshed_at)})` : '';
  return {
    label: 'Send back',
    name: `Send the ready jobs of ${q.name} back to where they died`,
    consequence:
      `Each ready job of ${q.name}, ${plural(q.stats.ready, 'job')}${counted}, goes back to the queue it died in ` +
      `(${data.dead_letter_sources.join(', ')}), with fresh attempts; the maintenance leader moves them in batches.`,
    confirm: `Send back ${plural(q.stats.ready, 'job')}`,
    unavailable: running ? 'A move is running' : q.stats.ready === 0 ? 'No ready jobs' : undefined,
    run: async () => {
      const move = await must(
        api.POST('/v1/queues/{queue}/moves', { params: { path: { queue: q.name } }, body: {} }),
      );
      return `Move started: ${plural(move.to_move, 'job')} of ${q.name} going back to where they died.`;
    },
  };
}
