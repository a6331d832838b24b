import { useEffect, useMemo, useState } from 'preact/hooks';
import { createApi, must } from './api.js';
import { FindJob } from './components/find-job.js';
import { AUTH_REQUIRED } from './config.js';
import { forgetKey, storedKey, storeKey } from './key-store.js';
import { PAGES } from './pages/index.js';
import { Login } from './pages/login.js';
import { href, match, useLocation } from './router.js';
import { type Session, SessionContext } from './session.js';

export function App() {
  const [session, setSession] = useState<Session>();
  const [notice, setNotice] = useState<string>();
  const [starting, setStarting] = useState(true);

  const signOut = (why?: string) => {
    forgetKey();
    setSession(undefined);
    setNotice(why);
  };

  /** Check a key (or, on a server without keys, no key) with GET /v1/whoami, then keep it. */
  const signIn = async (key: string | undefined) => {
    let refused = false;
    let signedIn = false;
    const api = createApi(key, () => {
      refused = true;
      // A key that stops working mid-session (removed from the server) ends the session.
      if (signedIn) signOut('The server no longer accepts this key. Sign in again.');
    });
    const who = await must(api.GET('/v1/whoami')).catch((err) => {
      throw refused ? new Error('The server does not accept this key.') : err;
    });
    if (key !== undefined) storeKey(key);
    signedIn = true;
    setSession({
      api,
      who,
      canAct: who.scopes.includes('admin'),
      signOut: () => signOut('Signed out.'),
    });
    setNotice(undefined);
  };

  // Once, at load.
  useEffect(() => {
    const key = storedKey();
    if (key === undefined && AUTH_REQUIRED) return setStarting(false);
    signIn(key)
      .catch((err: Error) => signOut(err.message))
      .finally(() => setStarting(false));
  }, []);

  if (starting) return null;
  if (!session) return <Login onSignIn={signIn} notice={notice} />;
  return (
    <SessionContext.Provider value={session}>
      <Shell session={session} />
    </SessionContext.Provider>
  );
}

function Shell({ session }: { session: Session }) {
  const where = useLocation();
  const found = useMemo(() => {
    for (const page of PAGES) {
      const params = match(page.path, where.path);
      if (params) return { page, params };
    }
    return undefined;
  }, [where.path]);

  // A new page: name it, and move focus to its heading so keyboard and screen-reader users start there.
  useEffect(() => {
    document.title = `${found ? found.page.title(found.params) : 'Not found'} · Baton`;
    document.querySelector<HTMLElement>('main h1')?.focus();
  }, [found]);

  const { who } = session;
  const role = !who.authenticated
    ? 'no API keys configured: anyone who can reach this server may act'
    : `signed in as ${who.name} (${who.scopes.join(', ')}${who.queue_limited ? ', some queues' : ''})`;
  return (
    <>
      {/* A button, not a link to #main: the fragment holds the page's route. */}
      <button type="button" class="skip" onClick={() => document.getElementById('main')?.focus()}>
        Skip to content
      </button>
      <header>
        <a class="brand" href={href('/')}>
          Baton
        </a>
        <nav aria-label="Pages">
          {PAGES.filter((p) => p.nav).map((p) => (
            <a
              key={p.path}
              href={href(p.path)}
              aria-current={
                found?.page === p
                  ? 'page'
                  : p.path !== '/' && where.path.startsWith(`${p.path}/`)
                    ? 'true'
                    : undefined
              }
            >
              {p.nav}
            </a>
          ))}
          <a href="/docs">API</a>
        </nav>
        <FindJob />
        <p class="who">
          {role}
          {!session.canAct && who.authenticated && <span class="badge">read-only</span>}
        </p>
        {who.authenticated && (
          <button type="button" onClick={session.signOut}>
            Sign out
          </button>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {found ? (
          <found.page.component params={found.params} query={where.query} />
        ) : (
          <>
            <h1 tabIndex={-1}>Not found</h1>
            <p>
              Nothing here. <a href={href('/')}>All queues</a>
            </p>
          </>
        )}
      </main>
    </>
  );
}
