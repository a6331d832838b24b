/**
 * Page cursors: the sort key of a page's last row, as base64url JSON. Opaque to clients; the
 * module that lists the rows checks a decoded key's every part before any of it reaches SQL.
 */
export function encodeCursor(key: unknown[]): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

/** The key inside a cursor: a JSON array of one to three strings, or undefined when it is not one. */
export function decodeCursor(cursor: string): string[] | undefined {
  try {
    const key: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(key) || key.length === 0 || key.length > 3) return undefined;
    return key.every((part) => typeof part === 'string') ? (key as string[]) : undefined;
  } catch {
    return undefined;
  }
}
