import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { BatonClient, Whoami } from './api.js';

/** Who is signed in, with what key, and what they may do: every page reads it. */
export interface Session {
  api: BatonClient;
  who: Whoami;
  /** An admin key: the page shows actions. (The server checks again on every call.) */
  canAct: boolean;
  signOut: () => void;
}

export const SessionContext = createContext<Session | undefined>(undefined);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession() outside a signed-in page');
  return session;
}
