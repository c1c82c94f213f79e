/** Public entry of the client library (package export "./client"). */
export { Queen, QueueRef, PartitionRef, DEFAULT_PARTITION, type QueenOptions } from './queen.js';
export { QueenHttpError, QueenNetworkError } from './errors.js';
export type {
  ConfigureMode,
  ConfigureResult,
  PushInput,
  PushOutcome,
  PushStatus,
  QueueInfo,
  QueueOptions,
  QueueOptionsPatch,
} from './types.js';
export { TimerRef, parseDuration, type TimerScheduled, type PendingTimerInfo } from './timers.js';
export {
  Consumer,
  TransactionBuilder,
  type AckOutcome,
  type AckResult,
  type AckStatus,
  type BrowsePage,
  type ConsumeOptions,
  type Message,
  type PopOptions,
} from './consume.js';
export type { DeadLetter, DeadLetterList, KafkaHeader, KafkaOrigin, QueueList, RequeueResult, ServerVersion } from './types.js';
export { headerBytes } from './types.js';
