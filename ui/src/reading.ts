import type { RefObject } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/**
 * Whether the operator is busy with a region of the page: the pointer is over it, focus is in it, or
 * text in it is selected. A list that refreshes on its own holds still meanwhile, so a row does not
 * move away under a reader's eyes, pointer or selection.
 */
export function useReading(region: RefObject<HTMLElement | null>): boolean {
  const [pointer, setPointer] = useState(false);
  const [focus, setFocus] = useState(false);
  const [selecting, setSelecting] = useState(false);
  useEffect(() => {
    const el = region.current;
    if (!el) return;
    const enter = () => setPointer(true);
    const leave = () => setPointer(false);
    const focusIn = () => setFocus(true);
    const focusOut = (e: FocusEvent) => setFocus(el.contains(e.relatedTarget as Node | null));
    const selection = () => {
      const s = document.getSelection();
      setSelecting(!!s && !s.isCollapsed && !!s.anchorNode && el.contains(s.anchorNode));
    };
    el.addEventListener('pointerenter', enter);
    el.addEventListener('pointerleave', leave);
    el.addEventListener('focusin', focusIn);
    el.addEventListener('focusout', focusOut);
    document.addEventListener('selectionchange', selection);
    return () => {
      el.removeEventListener('pointerenter', enter);
      el.removeEventListener('pointerleave', leave);
      el.removeEventListener('focusin', focusIn);
      el.removeEventListener('focusout', focusOut);
      document.removeEventListener('selectionchange', selection);
    };
  }, [region.current]);
  return pointer || focus || selecting;
}
