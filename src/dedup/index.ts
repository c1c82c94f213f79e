export {
  DedupCache,
  type HintedVouch,
  type LocalHit,
  type DedupCacheOptions,
  type DedupCacheStats,
  type EntryInfo,
  type PrepareAnswer,
  type TxnRow,
} from './cache.js';
export type { ItemSpans } from './entry.js';
export { estimateFootprintBytes } from './admission.js';
