import { type BatonClient, must, type Queue } from '../api.js';
import { plural, time } from '../format.js';
import type { Action } from './actions.js';

/**
 * What an admin can do to a queue. Counts are the leader's last count (they may have moved since,
 * and the confirmation says so); the answer of each call says what was actually done.
 */
export function queueActions(api: BatonClient, q: Queue): Action[] {
  const path = { params: { path: { queue: q.name } } };
  const counted = q.stats.live_refreshed_at ? ` (as counted at ${time(q.stats.live_refreshed_at)})` : '';
  const waiting = q.stats.ready + q.stats.scheduled + q.stats.waiting;
  return [
    q.paused
      ? {
          label: 'Resume',
          name: `Resume queue ${q.name}`,
          consequence: `Workers can claim its jobs again: ${plural(q.stats.ready, 'job')} ready${counted}.`,
          confirm: `Resume ${q.name}`,
          run: async () => {
            await must(api.POST('/v1/queues/{queue}/resume', path));
            return `Queue ${q.name} resumed.`;
          },
        }
      : {
          label: 'Pause',
          name: `Pause queue ${q.name}`,
          consequence:
            `Claims will get nothing from ${q.name} until it is resumed: ${plural(q.stats.ready, 'ready job')} ` +
            `will wait${counted}. Enqueues are still accepted, and the ${plural(q.stats.claimed, 'claimed job')} ` +
            'carry on under their leases.',
          confirm: `Pause ${q.name}`,
          run: async () => {
            await must(api.POST('/v1/queues/{queue}/pause', path));
            return `Queue ${q.name} paused.`;
          },
        },
    {
      label: 'Redrive all dead',
      name: `Redrive all dead jobs of queue ${q.name}`,
      consequence:
        `Every dead job of ${q.name}, ${plural(q.stats.dead, 'job')}${counted}, goes back to ready with ` +
        'fresh attempts (their error history is kept).',
      confirm: `Redrive ${plural(q.stats.dead, 'job')}`,
      unavailable: q.stats.dead === 0 ? 'No dead jobs' : undefined,
      run: async () => {
        const { redriven } = await must(
          api.POST('/v1/queues/{queue}/redrive', { ...path, body: { all: true } }),
        );
        return `${plural(redriven, 'job')} of ${q.name} redriven to ready.`;
      },
    },
    {
      label: 'Purge',
      name: `Purge queue ${q.name}`,
      consequence:
        `Cancels every ready, scheduled and waiting job of ${q.name}: ${plural(q.stats.ready, 'ready job')}, ` +
        `${plural(q.stats.scheduled, 'scheduled job')} and ${plural(q.stats.waiting, 'waiting job')}${counted}. Claimed jobs are left to their workers. ` +
        'Cancelled jobs do not run; this cannot be undone.',
      confirm: `Cancel ${plural(waiting, 'job')}`,
      danger: true,
      unavailable: waiting === 0 ? 'Nothing ready, scheduled or waiting' : undefined,
      run: async () => {
        const { cancelled } = await must(api.POST('/v1/queues/{queue}/purge', path));
        return `${plural(cancelled, 'job')} of ${q.name} cancelled.`;
      },
    },
  ];
}
