/**
 * Group commit: requests for the same statement that arrive while one is running wait for it and
 * then go together, as one statement, instead of one statement each.
 *
 * With nothing in flight a request runs at once, so an idle server adds no latency. Under load, N
 * concurrent claims (or acks) become one statement and one commit instead of N: PostgreSQL parses,
 * plans, locks and commits once, and claimers stop competing for the same rows at the head of the
 * ready index (each FOR UPDATE SKIP LOCKED claimer otherwise walks past the rows the others just
 * locked). Each request still gets its own answer.
 *
 * One request must not fail the others: when a shared statement fails on what an input held (a
 * value PostgreSQL refused; `isolate` says which errors those are), the requests of the group are
 * run again one at a time, so only the request that caused it fails. Any other failure (an outage)
 * fails every request of the group, as it would have failed each of them alone.
 */
export class GroupCommit<In, Out> {
  private pending: { item: In; resolve: (out: Out) => void; reject: (err: unknown) => void }[] = [];
  private running = false;

  /**
   * @param run executes one statement for a group and answers each item, in order
   * @param weight how much of a group an item uses (claims: the jobs it asks for)
   * @param capacity the most a group may hold (one item may exceed it alone)
   * @param isolate errors caused by one item's input, after which items are re-run one by one
   */
  constructor(
    private readonly run: (items: In[]) => Promise<Out[]>,
    private readonly weight: (item: In) => number = () => 1,
    private readonly capacity = 1000,
    private readonly isolate: (err: unknown) => boolean = () => false,
  ) {}

  /**
   * A group commit whose requests are lists (a batch enqueue, a batch ack): the lists of a group run
   * as one flat list, and each request gets back the answers to its own items.
   */
  static ofLists<In, Out>(
    run: (items: In[]) => Promise<Out[]>,
    capacity: number,
    isolate?: (err: unknown) => boolean,
  ): GroupCommit<In[], Out[]> {
    return new GroupCommit<In[], Out[]>(
      async (lists) => {
        const answers = await run(lists.flat());
        let end = 0;
        return lists.map((list) => {
          end += list.length;
          return answers.slice(end - list.length, end);
        });
      },
      (list) => list.length,
      capacity,
      isolate,
    );
  }

  submit(item: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    while (this.pending.length > 0) {
      let used = 0;
      let take = 0;
      while (take < this.pending.length) {
        const w = this.weight(this.pending[take]!.item);
        if (take > 0 && used + w > this.capacity) break;
        used += w;
        take++;
      }
      const group = this.pending.splice(0, take);
      try {
        const outs = await this.run(group.map((g) => g.item));
        group.forEach((g, i) => {
          g.resolve(outs[i]!);
        });
      } catch (err) {
        if (group.length > 1 && this.isolate(err)) await this.runEach(group);
        else for (const g of group) g.reject(err);
      }
    }
    this.running = false;
  }

  /** Each member alone, in order (still one statement at a time). */
  private async runEach(group: typeof this.pending): Promise<void> {
    for (const g of group) {
      try {
        g.resolve((await this.run([g.item]))[0]!);
      } catch (err) {
        g.reject(err);
      }
    }
  }
}

/**
 * A GroupCommit per key (a queue name): requests group only with requests for the same key. A key's
 * group is created on first use and dropped when no request for it is pending or running.
 */
export class KeyedGroupCommit<In, Out> {
  private readonly groups = new Map<string, { commit: GroupCommit<In, Out>; users: number }>();

  constructor(private readonly make: (key: string) => GroupCommit<In, Out>) {}

  async submit(key: string, item: In): Promise<Out> {
    let group = this.groups.get(key);
    if (!group) {
      group = { commit: this.make(key), users: 0 };
      this.groups.set(key, group);
    }
    group.users++;
    try {
      return await group.commit.submit(item);
    } finally {
      if (--group.users === 0) this.groups.delete(key);
    }
  }
}
