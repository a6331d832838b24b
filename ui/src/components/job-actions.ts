import { type BatonClient, type Job, must } from '../api.js';
import type { Action } from './actions.js';
import { bulk } from './bulk-actions.js';

/**
 * What an admin can do to one job: run it now while it is scheduled, cancel it while it is live,
 * redrive it while it is dead.
 */
export function jobActions(api: BatonClient, j: Job): Action[] {
  const actions: Action[] = [];
  if (j.state === 'scheduled') {
    actions.push({
      label: 'Run now',
      name: `Run job ${j.id} now`,
      consequence: `Job ${j.id} of ${j.queue} becomes ready now instead of at its run time (a retry’s backoff or a delay is cut short; its attempts and errors are kept).`,
      confirm: `Run job ${j.id} now`,
      run: async () => {
        const [result] = (await bulk(api, 'run_now', { ids: [j.id] })).results;
        return result?.outcome === 'ready_now'
          ? `Job ${j.id} is ready now.`
          : `Job ${j.id} was not run now: ${result?.message ?? 'it changed meanwhile'}.`;
      },
    });
  }
  if (j.state === 'waiting' || j.state === 'scheduled' || j.state === 'ready' || j.state === 'claimed') {
    actions.push({
      label: 'Cancel job',
      name: `Cancel job ${j.id}`,
      consequence:
        `Job ${j.id} of ${j.queue} (now ${j.state}) will not run` +
        (j.state === 'claimed' ? '; its worker’s lease ends and its ack will be refused' : '') +
        '. 1 job is cancelled; this cannot be undone.',
      confirm: `Cancel job ${j.id}`,
      danger: true,
      run: async () => {
        await must(api.POST('/v1/jobs/{id}/cancel', { params: { path: { id: j.id } } }));
        return `Job ${j.id} cancelled.`;
      },
    });
  }
  if (j.state === 'dead') {
    actions.push({
      label: 'Redrive job',
      name: `Redrive job ${j.id}`,
      consequence: `Dead job ${j.id} of ${j.queue} goes back to ready with fresh attempts (1 job; its error history is kept).`,
      confirm: `Redrive job ${j.id}`,
      run: async () => {
        const { redriven } = await must(
          api.POST('/v1/queues/{queue}/redrive', {
            params: { path: { queue: j.queue } },
            body: { ids: [j.id] },
          }),
        );
        return redriven === 1 ? `Job ${j.id} redriven to ready.` : `Job ${j.id} was no longer dead.`;
      },
    });
  }
  return actions;
}
