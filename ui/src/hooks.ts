import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Loaded<T> {
  data?: T;
  error?: Error;
  /** Load again now (after an action, say). */
  reload: () => void;
}

const isAbort = (err: unknown) => err instanceof DOMException && err.name === 'AbortError';

/**
 * `load()` now, and again every `everyMs` (0: never) while the tab is visible. Keeps the last good
 * answer through a failed poll; a request still running when the inputs change is aborted. While
 * `held()` answers true, the timed loads are skipped (a list the operator is reading or selecting
 * in stays as it is); new inputs and reload() still load.
 */
export function usePoll<T>(
  load: (signal: AbortSignal) => Promise<T>,
  everyMs: number,
  inputs: unknown[],
  held: () => boolean = () => false,
): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: Error }>({});
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const heldRef = useRef(held);
  heldRef.current = held;

  // Inputs changed: forget the old answer, so one queue's figures never show under another's name.
  useEffect(() => setState({}), inputs);

  // The caller's inputs are the dependencies: new inputs, new requests.
  useEffect(() => {
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = () => {
      if (heldRef.current()) timer = setTimeout(tick, everyMs);
      else void run();
    };
    const run = async () => {
      if (document.hidden) return;
      try {
        const data = await loadRef.current(abort.signal);
        if (!abort.signal.aborted) setState({ data });
      } catch (err) {
        if (!isAbort(err) && !abort.signal.aborted) setState((s) => ({ ...s, error: err as Error }));
      }
      if (everyMs > 0 && !abort.signal.aborted) timer = setTimeout(tick, everyMs);
    };
    const onVisible = () => {
      if (document.hidden || everyMs === 0) return;
      clearTimeout(timer);
      tick();
    };
    void run();
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      abort.abort();
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [...inputs, tick, everyMs]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}
