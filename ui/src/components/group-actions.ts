import { type BatonClient, type Group, must, type Queue } from '../api.js';
import { atOnce, plural, rate, time } from '../format.js';
import type { Action } from './actions.js';

/** A group with a name: the jobs without a group (group null) have no path in the API, so no actions. */
export type NamedGroup = Group & { group: string };
export const isNamed = (g: Group): g is NamedGroup => g.group !== null;

const counted = (g: Group) => (g.refreshed_at ? ` (as counted at ${time(g.refreshed_at)})` : '');

/**
 * Pause or resume one group of a queue (PUT /v1/queues/{queue}/groups/{group} with `paused`). Its
 * counts are the leader's last count of the queue's groups, as shown where the button is; the
 * confirmation says when they were taken.
 */
export function pauseAction(api: BatonClient, g: NamedGroup): Action {
  const path = { params: { path: { queue: g.queue, group: g.group } } };
  const who = `group ${g.group} of ${g.queue}`;
  if (g.paused) {
    return {
      label: 'Resume',
      name: `Resume ${who}`,
      consequence: `Workers can claim the jobs of ${who} again: ${plural(g.ready, 'job')} ready${counted(g)}.`,
      confirm: `Resume ${g.group}`,
      run: async () => {
        await must(api.PUT('/v1/queues/{queue}/groups/{group}', { ...path, body: { paused: false } }));
        return `Group ${g.group} of ${g.queue} resumed.`;
      },
    };
  }
  return {
    label: 'Pause',
    name: `Pause ${who}`,
    consequence:
      `Claims will get nothing from ${who} until it is resumed: ${plural(g.ready, 'ready job')} will ` +
      `wait${counted(g)}. The queue’s other groups are served as before; its claimed jobs ` +
      `(${plural(g.claimed, 'job')}) carry on under their leases.`,
    confirm: `Pause ${g.group}`,
    run: async () => {
      await must(api.PUT('/v1/queues/{queue}/groups/{group}', { ...path, body: { paused: true } }));
      return `Group ${g.group} of ${g.queue} paused.`;
    },
  };
}

/** What a group sets itself, in words: "concurrency limit 2 at once, weight 3". */
export function ownSettings(g: Group): string {
  const words: Record<string, string> = {
    concurrency_limit: `concurrency limit ${atOnce(g.concurrency_limit)}`,
    rate_limit: `rate limit ${rate(g.rate_limit)}`,
    weight: `weight ${g.weight}`,
    paused: 'paused',
  };
  return g.overridden.map((field) => words[field] ?? field).join(', ');
}

/** A group's actions on its own page: pause or resume, and reset to the queue's group defaults. */
export function groupActions(api: BatonClient, g: NamedGroup, q: Queue | undefined): Action[] {
  const who = `group ${g.group} of ${g.queue}`;
  const defaults = q
    ? ` (concurrency limit ${atOnce(q.group_concurrency_limit)}, rate limit ${rate(q.group_rate_limit)}, weight 1)`
    : '';
  return [
    pauseAction(api, g),
    {
      label: 'Reset to queue defaults',
      name: `Reset ${who} to the queue’s defaults`,
      consequence:
        `${who[0]!.toUpperCase()}${who.slice(1)} drops its own settings (${ownSettings(g) || 'none'}) and ` +
        `follows the queue’s group defaults again${defaults}` +
        (g.paused
          ? `; it is no longer paused, so its ${plural(g.ready, 'ready job')}${counted(g)} can be claimed`
          : '') +
        '. Its jobs are untouched.',
      confirm: `Reset ${g.group}`,
      unavailable: g.overridden.length === 0 ? 'It has no settings of its own' : undefined,
      run: async () => {
        const { reset } = await must(
          api.DELETE('/v1/queues/{queue}/groups/{group}', {
            params: { path: { queue: g.queue, group: g.group } },
          }),
        );
        return reset
          ? `Group ${g.group} of ${g.queue} reset to the queue’s defaults.`
          : `Group ${g.group} of ${g.queue} had no settings of its own.`;
      },
    },
  ];
}
