import { type Kysely, sql } from 'kysely';

/**
 * Secrets the replicas share (src/db/server-secrets.ts), made here once from PostgreSQL's strong
 * random source: gen_random_uuid() draws 122 random bits from pg_strong_random, so two of them give a
 * 256-bit key with 244 random bits. The first is the MAC key of SQS receipt handles
 * (src/sqs/receipt-handle.ts). ON CONFLICT: a second replica migrating at once keeps the first key.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.server_secrets (
      name text PRIMARY KEY,
      secret bytea NOT NULL CHECK (length(secret) >= 32),
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`
    INSERT INTO baton.server_secrets (name, secret)
    VALUES ('sqs_receipt_handles', uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()))
    ON CONFLICT (name) DO NOTHING`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS baton.server_secrets`.execute(db);
}
