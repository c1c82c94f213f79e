import { EventEmitter } from 'node:events';
import { BundleNotWrittenError, LifecycleError } from '../errors.js';
import type { PushItem, PushResult } from '../engine/writer.js';
import { LIMITS } from '../engine/limits.js';
import { Component } from '../util/lifecycle.js';
import type { MetricsRegistry } from '../telemetry/metrics.js';
import { activeLink, inSpan, MAX_LINKS, recording, verdictAttributes } from '../telemetry/tracing.js';
import { ROOT_CONTEXT, trace, type Context, type Link } from '@opentelemetry/api';

export interface FusionOptions {
  /** Most items in one bundle (one SQL call). */
  maxItems: number;
  /** Most payload bytes in one bundle. */
  maxBytes: number;
  /**
   * Hold before flushing a bundle that is not full, in ms. 0 (the default)
   * flushes on the next event-loop turn, which already fuses everything
   * submitted in the same turn; measured on Kafka ingest, a 2 ms hold cost
   * ~15% throughput and bought nothing, because items pile up on their own
   * while all flush slots are busy.
   */
  holdMs: number;
  /** Pending + in-flight payload bytes above which `overloaded` turns true. */
  maxInflightBytes: number;
  /** Bundles in flight at once (on disjoint partitions); at most the pool size. */
  maxConcurrentFlushes: number;
  metrics?: MetricsRegistry | undefined;
}

/** What a flush pushes a bundle into: LogWriter in the service. */
export interface BundleSink {
  push(items: readonly PushItem[]): Promise<PushResult[]>;
}

/** One submit() call: its results fill in as its items' bundles answer. */
interface Request {
  results: PushResult[];
  remaining: number;
  settled: boolean;
  resolve: (r: PushResult[]) => void;
  reject: (e: unknown) => void;
  /** The submitter's span, linked from the flush span. */
  link: Link | undefined;
}

interface Pending {
  item: PushItem;
  bytes: number;
  request: Request;
  index: number;
}

/**
 * The queue key of a (queue, partition) pair, `queue \x1f partition`, one
 * string per pair. Building it per item (a concatenation, then hashing the
 * new string for the map) cost ~0.25 µs an item of a Kafka drain's ~8 µs
 * (micro-benchmark: ~0.05 µs through this cache), and a topic's records
 * repeat a few pairs. Bounded: past MAX_KEYS pairs it starts over. \x1f
 * cannot occur in a valid partition, so two pairs never share a key; an
 * invalid item gets a key too (it fails in the writer).
 */
class PartitionKeys {
  private byQueue = new Map<unknown, Map<string, string>>();
  private count = 0;
  of(queue: unknown, partition: string): string {
    const known = this.byQueue.get(queue)?.get(partition);
    if (known !== undefined) return known;
    if (this.count >= MAX_KEYS) {
      this.byQueue = new Map();
      this.count = 0;
    }
    let byPartition = this.byQueue.get(queue);
    if (byPartition === undefined) {
      byPartition = new Map();
      this.byQueue.set(queue, byPartition);
    }
    // A non-string queue (validated later) still makes a key.
    const key = `${String(queue)}\x1f${partition}`;
    byPartition.set(partition, key);
    this.count++;
    return key;
  }
}
const MAX_KEYS = 65_536;

/**
 * The batching layer shared by the Kafka ingress and the HTTP push path.
 *
 * Items wait in a queue per log partition (queue \x1f partition). A flush
 * takes whole partitions that have no flush in flight, up to the bundle
 * limits, and pushes them as one bundle (one SQL call through LogWriter).
 * So: at most one flush per partition in flight (the single-flight the dedup
 * cache relies on and asserts), and disjoint partitions fuse into one call.
 *
 * States: the Component lifecycle (util/lifecycle.ts). While running,
 * submit() accepts items. stop() stops accepting, lets queued and in-flight
 * bundles finish (their callers get their results), then resolves.
 *
 * Backpressure: `overloaded` is true while pending + in-flight bytes exceed
 * maxInflightBytes; 'pressure' and 'relief' events mark the transitions, and
 * the Kafka ingress pauses fetching on pressure instead of buffering.
 */
export class Fusion extends Component {
  private readonly queues = new Map<string, Pending[]>();
  private readonly keys = new PartitionKeys();
  private readonly inFlight = new Set<string>();
  private flushing = 0;
  private bytesHeld = 0;
  /** Items and payload bytes queued (not yet taken by a flush): O(1) "is a full bundle waiting?". */
  private queuedItems = 0;
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private pressure = false;
  private drained: (() => void) | undefined;
  readonly events = new EventEmitter();
  private readonly bundleCounter;
  private readonly itemCounter;
  private readonly isolatedCounter;
  private readonly pushLatency;

  constructor(
    private readonly writer: BundleSink,
    private readonly opts: FusionOptions,
  ) {
    super('Fusion');
    this.bundleCounter = opts.metrics?.counter('queen_fusion_bundles_total', 'Bundles flushed by the fusion layer');
    this.itemCounter = opts.metrics?.counter('queen_fusion_items_total', 'Items flushed by the fusion layer');
    this.isolatedCounter = opts.metrics?.counter(
      'queen_fusion_bundles_split_total',
      'Bundles that failed unwritten and were pushed again one request at a time',
    );
    this.pushLatency = opts.metrics?.histogram(
      'queen_bundle_push_duration_seconds',
      'One bundle push to PostgreSQL (cache hydration, SQL and retries of contended segments), by result',
      { labelKeys: ['result'] },
    );
    opts.metrics
      ?.gauge('queen_fusion_pending_bytes', 'Payload bytes pending or in flight in the fusion layer')
      .collect(() => this.bytesHeld);
  }

  get overloaded(): boolean {
    return this.pressure;
  }

  protected async onStart(): Promise<void> {
    // Nothing to open: fusion's state is in memory.
  }

  protected async onStop(): Promise<void> {
    if (this.queues.size === 0 && this.flushing === 0) return;
    await new Promise<void>((resolve) => {
      this.drained = resolve;
      this.schedule(true);
    });
  }

  /**
   * Queues items and resolves with their results, in order, once their
   * bundles are answered; rejects if any of their bundles fails. One promise
   * per call, not per item: the Kafka path submits thousands at a time.
   */
  submit(items: readonly PushItem[]): Promise<PushResult[]> {
    if (this.state !== 'running') return Promise.reject(new LifecycleError(`Fusion is ${this.state}; not accepting items`));
    if (items.length === 0) return Promise.resolve([]);
    return new Promise<PushResult[]>((resolve, reject) => {
      const request: Request = {
        results: new Array<PushResult>(items.length),
        remaining: items.length,
        settled: false,
        resolve,
        reject,
        link: activeLink(),
      };
      items.forEach((item, index) => this.enqueue(item, request, index));
      this.updatePressure();
      this.schedule(false);
    });
  }

  private enqueue(item: PushItem, request: Request, index: number): void {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- items come from JSON bodies and JS callers and are validated later: null may arrive
    const partition = typeof item?.partition === 'string' ? item.partition : LIMITS.defaultPartition;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- items come from JSON bodies and JS callers and are validated later: null may arrive
    const key = this.keys.of(item?.queue, partition);
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- items come from JSON bodies and JS callers and are validated later: null may arrive
    const bytes = Buffer.isBuffer(item?.payload) ? item.payload.length : 0;
    let q = this.queues.get(key);
    if (!q) {
      q = [];
      this.queues.set(key, q);
    }
    q.push({ item, bytes, request, index });
    this.bytesHeld += bytes;
    this.queuedItems++;
    this.queuedBytes += bytes;
  }

  private updatePressure(): void {
    const over = this.bytesHeld > this.opts.maxInflightBytes;
    if (over !== this.pressure) {
      this.pressure = over;
      this.events.emit(over ? 'pressure' : 'relief');
    }
  }

  /** Flush soon: at once when a full bundle is waiting (or when draining), else after the hold. */
  private schedule(now: boolean): void {
    if (this.flushing >= this.opts.maxConcurrentFlushes) return;
    if (now || this.opts.holdMs === 0 || this.fullBundleWaiting()) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      this.immediate ??= setImmediate(() => {
        this.immediate = undefined;
        this.flush();
      });
      return;
    }
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, this.opts.holdMs);
  }

  /**
   * Enough is queued for a full bundle. Counts items of partitions that are in
   * flight too: then the flush takes what it can and the rest waits, which
   * only means an early flush, never a wrong one.
   */
  private fullBundleWaiting(): boolean {
    return this.queuedItems >= this.opts.maxItems || this.queuedBytes >= this.opts.maxBytes;
  }

  /** Starts as many bundles as slots allow, each over partitions not in flight. */
  private flush(): void {
    while (this.flushing < this.opts.maxConcurrentFlushes) {
      const bundle = this.takeBundle();
      if (!bundle) break;
      this.flushing++;
      void this.runBundle(bundle.keys, bundle.entries);
    }
    this.checkDrained();
  }

  private takeBundle(): { keys: string[]; entries: Pending[] } | undefined {
    const keys: string[] = [];
    const entries: Pending[] = [];
    let bytes = 0;
    for (const [key, q] of this.queues) {
      if (this.inFlight.has(key)) continue;
      if (entries.length > 0 && (entries.length + 1 > this.opts.maxItems || bytes + q[0]!.bytes > this.opts.maxBytes)) break;
      // Take this partition's items in arrival order, up to the limits; the
      // rest waits for the next flush of this partition.
      let n = 0;
      while (n < q.length && entries.length < this.opts.maxItems && (entries.length === 0 || bytes + q[n]!.bytes <= this.opts.maxBytes)) {
        bytes += q[n]!.bytes;
        entries.push(q[n]!);
        n++;
      }
      if (n === q.length) this.queues.delete(key);
      else q.splice(0, n);
      keys.push(key);
      this.inFlight.add(key);
      if (entries.length >= this.opts.maxItems || bytes >= this.opts.maxBytes) break;
    }
    this.queuedItems -= entries.length;
    this.queuedBytes -= bytes;
    return entries.length > 0 ? { keys, entries } : undefined;
  }

  private async runBundle(keys: string[], entries: Pending[]): Promise<void> {
    const timer = this.pushLatency?.startTimer();
    try {
      const { parent, links } = flushParent(entries);
      const results = await inSpan(
        'queen.fusion.flush',
        { parent, links, attributes: { 'queen.items': entries.length, 'queen.partitions': keys.length } },
        async (span) => {
          const out = await this.writer.push(entries.map((e) => e.item));
          if (recording(span)) span.setAttributes(verdictAttributes(out));
          return out;
        },
      );
      timer?.({ result: 'ok' });
      this.bundleCounter?.inc();
      this.itemCounter?.inc(entries.length);
      this.deliver(entries, results);
    } catch (err) {
      timer?.({ result: 'error' });
      if (err instanceof BundleNotWrittenError) await this.pushApart(entries, err);
      else this.rejectAll(entries, err);
    } finally {
      for (const k of keys) this.inFlight.delete(k);
      for (const e of entries) this.bytesHeld -= e.bytes;
      this.flushing--;
      this.updatePressure();
      if (this.queues.size > 0) this.schedule(this.state === 'stopping');
      this.checkDrained();
    }
  }

  private deliver(entries: readonly Pending[], results: readonly PushResult[]): void {
    entries.forEach((e, i) => {
      const r = e.request;
      r.results[e.index] = results[i]!;
      if (--r.remaining === 0 && !r.settled) {
        r.settled = true;
        r.resolve(r.results);
      }
    });
  }

  private rejectAll(entries: readonly Pending[], err: unknown): void {
    for (const e of entries) {
      if (e.request.settled) continue;
      e.request.settled = true;
      e.request.reject(err);
    }
  }

  /**
   * The bundle failed, not retriably, and nothing of it was written: push
   * each request's items on their own, so whatever one request carried fails
   * that request only (nothing one client sends may fail another's items).
   * One after another, still inside this flush, so the partitions stay
   * single-flight. A bundle of one request has nothing to separate.
   */
  private async pushApart(entries: readonly Pending[], err: BundleNotWrittenError): Promise<void> {
    const byRequest = new Map<Request, Pending[]>();
    for (const e of entries) {
      const list = byRequest.get(e.request);
      if (list) list.push(e);
      else byRequest.set(e.request, [e]);
    }
    if (byRequest.size === 1) {
      this.rejectAll(entries, err);
      return;
    }
    this.isolatedCounter?.inc();
    for (const part of byRequest.values()) {
      try {
        this.deliver(part, await this.writer.push(part.map((e) => e.item)));
      } catch (partErr) {
        this.rejectAll(part, partErr);
      }
    }
  }

  private checkDrained(): void {
    if (this.drained && this.queues.size === 0 && this.flushing === 0) {
      const d = this.drained;
      this.drained = undefined;
      d();
    }
  }
}

/**
 * The flush span's parent, chosen deterministically: the span that submitted
 * the bundle's first item (the oldest item of its first partition), so a
 * single caller's trace runs straight through the flush to PostgreSQL. Every
 * other distinct submitter is a link (at most MAX_LINKS). A bundle whose
 * first submitter had no span starts a new trace (never whatever context
 * happened to be active when the flush was scheduled).
 */
function flushParent(entries: readonly Pending[]): { parent: Context; links: Link[] } {
  const first = entries[0]?.request.link;
  const parent = first ? trace.setSpanContext(ROOT_CONTEXT, first.context) : ROOT_CONTEXT;
  const links: Link[] = [];
  const seen = new Set<string>(first ? [first.context.spanId] : []);
  for (const e of entries) {
    const link = e.request.link;
    if (!link || links.length >= MAX_LINKS || seen.has(link.context.spanId)) continue;
    seen.add(link.context.spanId);
    links.push(link);
  }
  return { parent, links };
}
