import { useState } from 'preact/hooks';

/**
 * The only thing the page shows until a key works (when the server has keys). The key goes to
 * sessionStorage, never into the URL, a cookie or the page's address bar history.
 */
export function Login({ onSignIn, notice }: { onSignIn: (key: string) => Promise<void>; notice?: string }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!key.trim()) return setError('Type an API key first.');
    setBusy(true);
    setError(undefined);
    try {
      await onSignIn(key.trim());
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  return (
    <main id="main" class="login">
      <h1>Baton</h1>
      <p>This server needs an API key. A key with any scope can look; an admin key can also act.</p>
      {notice && <p class="warning">{notice}</p>}
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
          aria-describedby="key-help"
          aria-invalid={error ? true : undefined}
        />
        <p id="key-help" class="muted">
          Kept in this tab only (sessionStorage) and sent as Authorization: Bearer to this server.
        </p>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}
