import type { ComponentChildren } from 'preact';
import { clock } from '../format.js';
import { Facts } from './bits.js';

/**
 * Figures of one count, under the time it was taken. The leader counts live jobs every tick and
 * finished ones (kept in history) about once a minute: each gets its own group, so that figures of
 * different moments never read as one snapshot ("Completed 44" next to "Completed, last minute 46").
 */
export function CountGroup({
  id,
  title,
  at,
  rows,
  note,
  heading: Heading = 'h2',
}: {
  id: string;
  title: string;
  /** When the count was taken; null: not yet. */
  at: string | null;
  rows: [string, ComponentChildren][];
  note?: string;
  heading?: 'h2' | 'h3';
}) {
  return (
    <section aria-labelledby={id} class={rows.length <= 2 ? 'count-group few' : 'count-group'}>
      <Heading id={id}>
        {title}, {at ? `as of ${clock(at)}` : 'not counted yet'}
      </Heading>
      <Facts rows={rows} look="tiles" />
      {note && <p class="muted">{note}</p>}
    </section>
  );
}
