import { clock, relative } from '../format.js';

/**
 * A time and how far it is from now (by the server's clock): "02:30:00 in 4 h" today, else with its
 * date ("30 Nov 2026, 02:30:00"), so a table of them fits a narrow window.
 */
export function When({ at, now }: { at: string | null; now: number }) {
  if (!at) return <>—</>;
  return (
    <>
      {clock(at)} <span class="muted relative">{relative(at, now)}</span>
    </>
  );
}
