/**
 * How many deliveries of one push queue a replica keeps in flight: additive increase, multiplicative
 * decrease, as TCP finds a link's rate. Each delivery answered in time adds 1/size (about one more
 * slot per window of successes, up to the queue's concurrency); a 429, a 503 or a timeout halves it
 * (down to one). The endpoint's own Retry-After also stops this replica's deliveries until then.
 */
export class PushWindow {
  private size: number;
  /** No delivery before this time (epoch ms): the endpoint asked for a pause. */
  pausedUntil = 0;

  constructor(private max: number) {
    this.size = max;
  }

  /** Deliveries that may be in flight now. */
  get slots(): number {
    return Math.max(1, Math.floor(this.size));
  }

  answered(): void {
    this.size = Math.min(this.max, this.size + 1 / this.size);
  }

  throttled(retryAfterMs: number | undefined, now = Date.now()): void {
    this.size = Math.max(1, this.size / 2);
    if (retryAfterMs !== undefined) this.pausedUntil = Math.max(this.pausedUntil, now + retryAfterMs);
  }

  /** The queue's concurrency changed: a smaller one applies at once, a larger one is grown into. */
  setMax(max: number): void {
    this.max = max;
    this.size = Math.min(this.size, max);
  }
}
