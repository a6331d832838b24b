/**
 * Where the API key is kept: sessionStorage. It lasts as long as the tab, only this origin's
 * scripts can read it, it never goes into a URL or a cookie, and api.ts sends it only as an
 * Authorization header to this same server. Signing out (or closing the tab) forgets it.
 */
const STORAGE_KEY = 'baton.apiKey';

export const storedKey = (): string | undefined => sessionStorage.getItem(STORAGE_KEY) ?? undefined;
export const storeKey = (key: string): void => sessionStorage.setItem(STORAGE_KEY, key);
export const forgetKey = (): void => sessionStorage.removeItem(STORAGE_KEY);
