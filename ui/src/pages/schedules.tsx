import { must, type Schedule, serverClock } from '../api.js';
import { ErrorLine, Loading, Pager, Scroll, usePager } from '../components/bits.js';
import { When } from '../components/when.js';
import { REFRESH_MS } from '../config.js';
import { usePoll } from '../hooks.js';
import { href } from '../router.js';
import { useSession } from '../session.js';

const PAGE = 50;

/**
 * Every cron schedule the key may see (GET /v1/schedules, keyset paged in name order; a key
 * limited to queue patterns gets only its queues' schedules), with next and last run. One read of
 * the schedules table per poll, never a count of jobs.
 */
export function SchedulesPage() {
  const { api, who } = useSession();
  const pager = usePager();
  const list = usePoll(
    async (signal) => {
      const answer = await api.GET('/v1/schedules', {
        params: { query: { limit: PAGE, cursor: pager.cursor } },
        signal,
      });
      return { ...(await must(Promise.resolve(answer))), now: serverClock(answer.response) };
    },
    REFRESH_MS,
    [api, pager.cursor],
  );
  const schedules = list.data?.schedules;
  return (
    <>
      <h1 tabIndex={-1}>Schedules</h1>
      <ErrorLine error={list.error} />
      {!schedules ? (
        list.error ? null : (
          <Loading />
        )
      ) : schedules.length === 0 && pager.page === 1 ? (
        <p>
          {who.queue_limited ? 'No schedules for the queues this key may use.' : 'No schedules yet.'} A
          schedule is created with PUT /v1/schedules/&#123;name&#125; or declared in BATON_SCHEDULES_FILE.
        </p>
      ) : (
        <>
          {who.queue_limited && (
            <p class="muted">This key sees only the schedules of the queues it may use.</p>
          )}
          <Scroll label="Schedules">
            <table class="schedules">
              <caption class="visually-hidden">Cron schedules by name, with their next and last run</caption>
              <thead>
                <tr>
                  <th scope="col">Schedule</th>
                  <th scope="col">Queue</th>
                  <th scope="col">When</th>
                  <th scope="col">Next run</th>
                  <th scope="col" class="wide">
                    Last run
                  </th>
                  <th scope="col" class="wide">
                    Last job
                  </th>
                  <th scope="col" class="wide">
                    Source
                  </th>
                </tr>
              </thead>
              <tbody>
                {schedules.map((s) => (
                  <ScheduleRow key={s.name} schedule={s} now={list.data!.now} />
                ))}
              </tbody>
            </table>
          </Scroll>
          <Pager pager={pager} nextCursor={list.data?.next_cursor} what="schedules" />
        </>
      )}
    </>
  );
}

function ScheduleRow({ schedule: s, now }: { schedule: Schedule; now: number }) {
  return (
    <tr>
      <th scope="row">
        <a href={href('/schedules', s.name)}>{s.name}</a>
        {s.paused && <span class="badge paused">paused</span>}
        {s.last_error && <span class="badge state-dead">failed</span>}
      </th>
      <td class="name">
        <a href={href('/queues', s.queue)}>{s.queue}</a>
      </td>
      <td class="wraps">
        <code>{s.cron}</code> <span class="muted">{s.timezone}</span>
      </td>
      <td class="wraps">{s.paused ? 'paused' : <When at={s.next_run_at} now={now} />}</td>
      <td class="wide wraps">
        <When at={s.last_run_at} now={now} />
      </td>
      <td class="wide">{s.last_job_id ? <a href={href('/jobs', s.last_job_id)}>{s.last_job_id}</a> : '—'}</td>
      <td class="wide">{s.source === 'file' ? (s.drifted ? 'file (changed since)' : 'file') : 'API'}</td>
    </tr>
  );
}
