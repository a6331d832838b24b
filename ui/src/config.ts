/** Settings the server writes into index.html's meta tags (src/plugins/ui.ts). */
const meta = (name: string) => document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? '';

/** Whether the server has API keys configured (then the page asks for one before anything else). */
export const AUTH_REQUIRED = meta('baton-auth') !== 'off';

/**
 * How often live figures are re-read: the leader's counting tick, at least 2 s. Every figure comes
 * from counts the leader keeps (baton.queue_stats), so a poll reads one small table and never
 * counts jobs; polling stops while the tab is hidden.
 */
export const REFRESH_MS = Math.max(2000, Number(meta('baton-refresh-ms')) || 5000);

/** History changes once a minute. */
export const HISTORY_REFRESH_MS = 60_000;
