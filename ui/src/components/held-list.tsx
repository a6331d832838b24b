import type { ComponentChildren } from 'preact';
import { useRef } from 'preact/hooks';
import { REFRESH_MS } from '../config.js';
import { duration } from '../format.js';
import { type Loaded, usePoll } from '../hooks.js';
import { useReading } from '../reading.js';
import { type Selection, useSelection } from './bulk-actions.js';

/**
 * A list of jobs that refreshes every REFRESH_MS and holds still while the operator is busy with it:
 * the pointer over it, focus or selected text in it (`region`, reading.ts), or jobs ticked. The
 * Jobs page and a queue's job browser are both this.
 */
export function useHeldList<T>(
  load: (signal: AbortSignal) => Promise<T>,
  inputs: unknown[],
): { list: Loaded<T>; region: { current: HTMLDivElement | null }; selection: Selection; held: boolean } {
  const region = useRef<HTMLDivElement>(null);
  const reading = useReading(region);
  const selection = useSelection();
  const held = reading || selection.size > 0;
  const list = usePoll(load, REFRESH_MS, inputs, () => held);
  return { list, region, selection, held };
}

/** The line above such a list: whether it is refreshing or holding still. */
export function RefreshState({ held, children }: { held: boolean; children?: ComponentChildren }) {
  return (
    <p class="muted refresh-state" role="status">
      {held
        ? 'Holding still while you read or select; it refreshes again once you are done.'
        : `Refreshes every ${duration(REFRESH_MS)}.`}
      {children}
    </p>
  );
}
