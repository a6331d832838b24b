import { type BatonClient, type Job, must } from '../api.js';
import type { Action } from './actions.js';

/** What an admin can do to one job: cancel it while it is live, redrive it while it is dead. */
export function jobActions(api: BatonClient, j: Job): Action[] {
  const actions: Action[] = [];
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
