/**
 * @hey-api/openapi-ts over Baton's checked-in document: the fetch client, types, zod schemas, and an
 * SDK that checks every request and every 2xx answer against them (validator: true).
 */
export default {
  input: '../../../openapi/openapi.json',
  output: 'client',
  logs: { level: 'warn', file: false },
  plugins: ['@hey-api/client-fetch', '@hey-api/typescript', 'zod', { name: '@hey-api/sdk', validator: true }],
};
