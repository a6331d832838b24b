import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';

/** Small pieces every page uses. Everything shown is text: Preact sets it with textContent. */

export function ErrorLine({ error }: { error?: Error }) {
  return error ? (
    <p class="error" role="alert">
      {error.message}
    </p>
  ) : null;
}

export const Loading = () => <p class="muted">Loading…</p>;

export function StateBadge({ state }: { state: string }) {
  return <span class={`badge state-${state}`}>{state}</span>;
}

/** A table that scrolls sideways on a narrow screen instead of squeezing its columns. */
export function Scroll({ children, label }: { children: ComponentChildren; label: string }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard
    <section class="scroll" tabIndex={0} aria-label={label}>
      {children}
    </section>
  );
}

/** Keyset paging: the cursors of the pages seen so far, so "previous" can go back. */
export function usePager() {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  return {
    cursor: cursors.at(-1),
    page: cursors.length,
    next: (cursor: string) => setCursors((c) => [...c, cursor]),
    previous: () => setCursors((c) => (c.length > 1 ? c.slice(0, -1) : c)),
  };
}

export function Pager({
  pager,
  nextCursor,
  what,
}: {
  pager: ReturnType<typeof usePager>;
  nextCursor: string | null | undefined;
  what: string;
}) {
  if (pager.page === 1 && !nextCursor) return null;
  return (
    <nav class="pager" aria-label={`Pages of ${what}`}>
      <button type="button" disabled={pager.page === 1} onClick={pager.previous}>
        Previous page
      </button>
      <span>Page {pager.page}</span>
      <button type="button" disabled={!nextCursor} onClick={() => nextCursor && pager.next(nextCursor)}>
        Next page
      </button>
    </nav>
  );
}

/** Labelled figures: `tiles` for counts at a glance, `settings` for a list of label and value. */
export function Facts({ rows, look }: { rows: [string, ComponentChildren][]; look: 'tiles' | 'settings' }) {
  return (
    <dl class={look}>
      {rows.map(([label, value]) => (
        <div key={label}>
          <dt>{label}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}
