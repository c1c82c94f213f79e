import {
  ADMIT_FRACTION,
  AUX_MAP_SOFT_CAP,
  ENTRY_OVERHEAD_BYTES,
  RESERVATION_TTL_MS,
  SUPPRESS_COOLDOWN_MS,
  UNIT_HASHES,
  UNIT_OVERHEAD_BYTES,
  WARN_INTERVAL_MS,
} from './constants.js';
import { PresenceFilter } from './presenceFilter.js';
import { MAX_PAGE_SLOTS, PAGE_OVERHEAD_BYTES, SLOT_BYTES, TARGET_LOAD } from './occurrenceTable.js';
import { SoftCappedMap } from '../util/softCappedMap.js';

/**
 * Estimated accounted bytes of an entry holding `hashes` hashes: an
 * occurrence table sized for them as a hydration sizes it (pages at
 * TARGET_LOAD, SLOT_BYTES a slot), plus page and directory overheads and
 * its units. An upper bound of what install() then accounts.
 */
export function estimateFootprintBytes(hashes: number): number {
  if (hashes <= 0) return 0;
  const slots = Math.ceil(hashes / TARGET_LOAD);
  const pages = Math.max(1, Math.ceil(slots / MAX_PAGE_SLOTS));
  return (
    ENTRY_OVERHEAD_BYTES +
    Math.max(slots + pages, 16 * pages) * SLOT_BYTES +
    pages * (PAGE_OVERHEAD_BYTES + 16) +
    Math.ceil(hashes / UNIT_HASHES) * UNIT_OVERHEAD_BYTES
  );
}

/**
 * Accounted bytes of a filter entry of `blocks` blocks holding `hashes`
 * hashes: its filter, the entry and its units (entry.ts, bytes).
 */
export function estimateFilterFootprintBytes(blocks: number, hashes: number): number {
  return ENTRY_OVERHEAD_BYTES + PresenceFilter.bytesFor(blocks) + Math.ceil(Math.max(0, hashes) / UNIT_HASHES) * UNIT_OVERHEAD_BYTES;
}

/**
 * The memory policy's own state: cooldown deadlines of suppressed
 * partitions, last measured footprints, byte reservations of admitted but
 * not yet installed rebuilds, and the warning rate limit. Pure bookkeeping;
 * the cache decides when to consult it.
 *
 * States of one partition here:
 * - unknown: no cooldown, no hint.
 * - suppressed(deadline): a rebuild failed the fit test at deadline - 30 s;
 *   inCooldown() is true until the deadline, then the entry is forgotten on
 *   the next look (the partition is re-tested on its next flush).
 * - reserved(bytes, since): admitted; the estimate counts against the budget
 *   until the install, the end of the flush or the next prepare releases it,
 *   or 60 s pass (a flush that never came back must not hold budget). This
 *   keeps several rebuilds admitted during concurrent flushes (each awaiting
 *   its fetch) from jointly overshooting the 90% line.
 * - hinted(bytes): the footprint the partition had when it last left the
 *   cache, a better estimate than an allocator upper bound.
 *
 * Cooldowns and hints are SoftCappedMaps (100,000 entries): a reset costs a
 * re-test or a re-measured estimate, never a verdict.
 */
export class AdmissionPolicy {
  readonly budgetBytes: number;
  private readonly cooldowns: SoftCappedMap<number, number>;
  private readonly hints: SoftCappedMap<number, number>;
  private readonly refused: SoftCappedMap<number, number>;
  private readonly reservations = new Map<number, { bytes: number; sinceMs: number }>();
  private reservedTotal = 0;
  private lastWarnMs = -Infinity;
  private suppressedSinceWarn = 0;

  constructor(
    readonly capBytes: number,
    private readonly now: () => number,
    private readonly onWarn: ((message: string) => void) | undefined,
    auxSoftCap = AUX_MAP_SOFT_CAP,
  ) {
    this.budgetBytes = ADMIT_FRACTION * capBytes;
    this.cooldowns = new SoftCappedMap<number, number>(auxSoftCap, (deadline) => deadline <= this.now());
    this.hints = new SoftCappedMap<number, number>(auxSoftCap);
    this.refused = new SoftCappedMap<number, number>(auxSoftCap);
  }

  /** True while pid serves a cooldown; an expired deadline is forgotten here. */
  inCooldown(pid: number, nowMs: number): boolean {
    const d = this.cooldowns.get(pid);
    if (d === undefined) return false;
    if (d > nowMs) return true;
    this.cooldowns.delete(pid);
    return false;
  }

  /**
   * pid failed the fit test with `hashes` in its window: 30 s cooldown, and
   * a warning at most once per minute. The size is kept (refusedHashes) so
   * a re-test can be skipped while the cache has no room for it.
   */
  suppress(pid: number, nowMs: number, hashes: number, detail: () => string): void {
    this.cooldowns.set(pid, nowMs + SUPPRESS_COOLDOWN_MS);
    this.refused.set(pid, hashes);
    this.suppressedSinceWarn++;
    if (this.onWarn !== undefined && nowMs - this.lastWarnMs >= WARN_INTERVAL_MS) {
      const n = this.suppressedSinceWarn;
      this.lastWarnMs = nowMs;
      this.suppressedSinceWarn = 0;
      this.onWarn(
        `dedup cache at its memory cap: ${n} partition rebuild(s) suppressed since the last warning (they answer -1, i.e. full SQL probes, for ${SUPPRESS_COOLDOWN_MS / 1000} s); ${detail()}`,
      );
    }
  }

  clearCooldown(pid: number): void {
    this.cooldowns.delete(pid);
    this.refused.delete(pid);
  }

  /** In-window hashes pid had when it was last refused (undefined: never, or forgotten). */
  refusedHashes(pid: number): number | undefined {
    return this.refused.get(pid);
  }

  /** Gauge: partitions whose cooldown has not expired (expired ones are dropped while counting). */
  suppressedCount(nowMs: number): number {
    let n = 0;
    for (const [pid, d] of this.cooldowns.entries()) {
      if (d > nowMs) n++;
      else this.cooldowns.delete(pid);
    }
    return n;
  }

  /**
   * Estimated footprint of a full rebuild. The caller's count is an upper
   * bound (from the allocator); our last measured footprint is usually more
   * accurate, so we take the smaller of the two. 0 hashes (brand-new
   * partition) estimates 0 bytes.
   */
  footprint(pid: number, estimatedHashes: number): number {
    const bound = estimateFootprintBytes(estimatedHashes);
    const hint = this.hints.get(pid);
    return hint === undefined ? bound : Math.min(bound, hint);
  }
  rememberFootprint(pid: number, bytes: number): void {
    this.hints.set(pid, bytes);
  }
  forgetFootprint(pid: number): void {
    this.hints.delete(pid);
  }

  reserve(pid: number, bytes: number, nowMs: number): void {
    this.release(pid);
    this.reservations.set(pid, { bytes, sinceMs: nowMs });
    this.reservedTotal += bytes;
  }
  release(pid: number): void {
    const r = this.reservations.get(pid);
    if (r === undefined) return;
    this.reservations.delete(pid);
    this.reservedTotal -= r.bytes;
  }
  /** Bytes reserved by other partitions' admitted rebuilds (stale reservations are dropped first). */
  reservedExcept(pid: number, nowMs: number): number {
    // The map holds reservations in the order they were made (reserve
    // re-inserts), so the stale ones are at its front and the walk stops at
    // the first live one. Background window builds keep theirs across
    // flushes: at 100 k partitions thousands are held at once, and walking
    // them all on every call was 3.7 % of the broker's CPU. (A clock that
    // stepped back would only keep a stale one longer: budget held, never a
    // verdict.)
    for (const [p, r] of this.reservations) {
      if (nowMs - r.sinceMs < RESERVATION_TTL_MS) break;
      this.release(p);
    }
    return this.reservedTotal - (this.reservations.get(pid)?.bytes ?? 0);
  }

  /** Sizes of the auxiliary maps (tests: the soft cap holds). */
  auxSizes(): { cooldowns: number; hints: number; refused: number; reservations: number } {
    return { cooldowns: this.cooldowns.size, hints: this.hints.size, refused: this.refused.size, reservations: this.reservations.size };
  }

  clear(): void {
    this.cooldowns.clear();
    this.hints.clear();
    this.refused.clear();
    this.reservations.clear();
    this.reservedTotal = 0;
    this.suppressedSinceWarn = 0;
  }
}
