import type pg from 'pg';

/**
 * EXPLAIN (ANALYZE, BUFFERS) of a claim statement, run for real inside a transaction that is rolled
 * back, so measuring a claim claims nothing: its time, the shared buffers it touched, and which scan
 * picked the rows.
 */

export interface Explained {
  executionMs: number;
  planningMs: number;
  buffers: number;
  scan: string;
  rowsRemovedByFilter: number;
}

function walk(node: any, visit: (n: any) => void): void {
  visit(node);
  for (const child of node.Plans ?? []) walk(child, visit);
}

export async function explainClaim(
  client: pg.ClientBase,
  text: string,
  params: unknown[],
  scanRelation: string,
): Promise<Explained> {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, params);
    const top = rows[0]['QUERY PLAN'][0];
    // The claim's own scan: the first table scan under LockRows (the FOR UPDATE SKIP LOCKED pick),
    // not the join that fetches the picked rows again for the UPDATE.
    let scan = '';
    let removed = 0;
    walk(top.Plan, (lock) => {
      if (lock['Node Type'] !== 'LockRows' || scan) return;
      walk(lock, (n) => {
        // The table itself, or one of its partitions (jobs_0, jobs_1, ... in the ring).
        const relation: string | undefined = n['Relation Name'];
        if (scan || !(relation === scanRelation || relation?.startsWith(`${scanRelation}_`))) return;
        scan = `${n['Node Type']}${n['Index Name'] ? ` using ${n['Index Name']}` : ''}`;
        removed = (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0);
      });
    });
    return {
      executionMs: top['Execution Time'],
      planningMs: top['Planning Time'],
      buffers: top.Plan['Shared Hit Blocks'] + top.Plan['Shared Read Blocks'],
      scan,
      rowsRemovedByFilter: removed,
    };
  } finally {
    await client.query('ROLLBACK');
  }
}
