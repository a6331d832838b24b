import { type BatonClient, must, type Schedule } from '../api.js';
import { time } from '../format.js';
import type { Action } from './actions.js';

/** What an admin can do to a schedule: pause or resume it, and trigger it now (one job, now). */
export function scheduleActions(api: BatonClient, s: Schedule): Action[] {
  const path = { params: { path: { name: s.name } } };
  const when = `${s.cron} (${s.timezone})`;
  return [
    s.paused
      ? {
          label: 'Resume',
          name: `Resume schedule ${s.name}`,
          consequence:
            `${s.name} enqueues a job into ${s.queue} again at each occurrence of ${when}, from the next one ` +
            'after now. The occurrences it missed while paused are not caught up.',
          confirm: `Resume ${s.name}`,
          run: async () => {
            const after = await must(api.POST('/v1/schedules/{name}/resume', path));
            return `Schedule ${s.name} resumed: next run ${time(after.next_run_at)}.`;
          },
        }
      : {
          label: 'Pause',
          name: `Pause schedule ${s.name}`,
          consequence:
            `${s.name} enqueues nothing into ${s.queue} until it is resumed` +
            (s.next_run_at ? `: its next run, ${time(s.next_run_at)}, will not happen` : '') +
            '. Jobs it already enqueued are untouched, and on resume it does not catch up.',
          confirm: `Pause ${s.name}`,
          run: async () => {
            await must(api.POST('/v1/schedules/{name}/pause', path));
            return `Schedule ${s.name} paused.`;
          },
        },
    {
      label: 'Trigger now',
      name: `Trigger schedule ${s.name} now`,
      consequence:
        `Enqueues one job into ${s.queue} now, with the schedule’s payload` +
        (s.paused ? ', although the schedule is paused' : '') +
        (s.overlap === 'skip' ? ', even if its last job is still running' : '') +
        '. It becomes the schedule’s last job; its occurrences go on as before.',
      confirm: `Enqueue 1 job into ${s.queue}`,
      run: async () => {
        const job = await must(api.POST('/v1/schedules/{name}/trigger', path));
        return `Job ${job.id} enqueued into ${job.queue} (${job.state}).`;
      },
    },
  ];
}
