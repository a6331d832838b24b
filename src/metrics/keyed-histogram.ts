import { Histogram, type LabelValues } from 'prom-client';

/**
 * A prom-client Histogram that can observe by a key the caller already has for a label set (a
 * queue's label, a route and status), for the observations made once per request or per job.
 *
 * prom-client's observe() checks the label names, builds a hash string from the labels and looks the
 * series up on every call: once per request (request durations) and once or twice per job (queue
 * lag, claim to ack), a share of the server's CPU per job in batched processing worth saving
 * (docs/benchmarks.md, "What was tried and what it gave", row "KeyedHistogram"). Here the
 * first observation of a key goes through observe() as before, which checks the labels and creates the
 * series; later ones add to that series directly, as observe() would. The series is prom-client's own
 * (its `hashMap` entry), so the exposition, reset() and remove() are unchanged;
 * test/observability/keyed-histogram.test.ts checks that the output is the same as observe()'s.
 */

interface Series {
  sum: number;
  count: number;
  bucketValues: Record<number, number>;
  labels: Record<string, string | number>;
}

/** prom-client 15's Histogram internals used here. */
interface HistogramInternals {
  hashMap: Record<string, Series>;
  upperBounds: readonly number[];
}

export class KeyedHistogram<T extends string> extends Histogram<T> {
  private byKey = new Map<string, Series>();

  /**
   * Observe `value` under `labels`, which `key` names: the same key must always come with the same
   * labels.
   */
  observeKeyed(key: string, labels: LabelValues<T>, value: number): void {
    const series = this.byKey.get(key);
    if (series === undefined || !Number.isFinite(value)) {
      this.observe(labels, value);
      this.remember(key, labels);
      return;
    }
    series.sum += value;
    series.count += 1;
    const bounds = (this as unknown as HistogramInternals).upperBounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        series.bucketValues[bounds[i]!]! += 1;
        return;
      }
    }
  }

  override reset(): void {
    super.reset();
    this.byKey = new Map();
  }

  override remove(...values: string[]): void;
  override remove(labels: LabelValues<T>): void;
  override remove(...args: unknown[]): void {
    (super.remove as (...a: unknown[]) => void)(...args);
    this.byKey = new Map();
  }

  /** Find the series observe() made for these labels (once per key). */
  private remember(key: string, labels: LabelValues<T>): void {
    const wanted = labels as Record<string, string | number>;
    for (const series of Object.values((this as unknown as HistogramInternals).hashMap)) {
      const have = series.labels;
      const keys = Object.keys(have);
      if (
        keys.length === Object.keys(wanted).length &&
        keys.every((k) => String(have[k]) === String(wanted[k]))
      ) {
        this.byKey.set(key, series);
        return;
      }
    }
  }
}
