import { describe, expect, it } from 'vitest';
import { compilePending } from '../../src/http/lazy-compile.js';
import { createTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

const database = useTestDatabase();

describe('route schemas compiled on first use', () => {
  it('every route validator and response serializer the app declares compiles', async () => {
    const app = await createTestApp(database);
    try {
      // Throws on the first schema that cannot compile; the server runs the same after it listens.
      expect(compilePending()).toBe(0);
      // And a route compiled that way answers as it did: a bad body is a 400 naming its field.
      const res = await app.inject({
        method: 'POST',
        url: '/v1/queues/lazy/jobs',
        payload: { payload: 1, delay_ms: -1 },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().errors[0].field).toBe('delay_ms');
    } finally {
      await app.close();
    }
  });
});
