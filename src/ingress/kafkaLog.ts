import { logLevel, type logCreator } from 'kafkajs';
import type { Logger } from '../telemetry/logger.js';

/**
 * kafkajs logs every error response of the protocol at error level, before
 * the code that sent the request has decided anything; most are retried and
 * end well. These are the ones a healthy start produces, each handled by its
 * caller, so they are demoted to info (seen on a fresh broker: `make run`
 * with a new `events` topic):
 *
 *   Metadata UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE: subscribing
 *     to a topic that does not exist yet makes the broker create it, and the
 *     first metadata answers say so until it has leaders. The ingress's
 *     retryStartup retries; if the topic never appears, start-up fails and
 *     says so there.
 *   GroupCoordinator COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS:
 *     a broker on which no group has committed yet creates __consumer_offsets
 *     on the first FindCoordinator, and answers these meanwhile. kafkajs
 *     retries; if it gives up, the consumer crashes and the supervisor logs
 *     that once, with the cause.
 *
 * Everything else keeps its level. A consumer crash and kafkajs's own
 * "Restarting the consumer" are not logged here at all: the supervisor logs
 * each crash once, with its root cause.
 */
const BENIGN_RESPONSE_ERRORS: readonly { request: string; error: string }[] = [
  { request: 'Response Metadata(', error: 'This server does not host this topic-partition' },
  { request: 'Response Metadata(', error: 'There is no leader for this topic-partition as we are in the middle of a leadership election' },
  { request: 'Response GroupCoordinator(', error: 'The group coordinator is not available' },
  { request: 'Response GroupCoordinator(', error: "The coordinator is loading and hence can't process requests for this group" },
];

export function isBenignStartupResponse(message: string, error: unknown): boolean {
  return BENIGN_RESPONSE_ERRORS.some((b) => message.startsWith(b.request) && error === b.error);
}

/** kafkajs's log lines into the service's logger (warn and above; the known-benign ones above at info). */
export function kafkajsLogCreator(log: Logger): logCreator {
  return () => (entry) => {
    const { message, ...rest } = entry.log;
    if (message.startsWith('Crash: ') || message.startsWith('Restarting the consumer')) return;
    if (entry.level <= logLevel.ERROR && isBenignStartupResponse(message, rest.error)) log.info({ kafka: rest }, `kafkajs: ${message}`);
    else if (entry.level <= logLevel.ERROR) log.error({ kafka: rest }, `kafkajs: ${message}`);
    else if (entry.level === logLevel.WARN) log.warn({ kafka: rest }, `kafkajs: ${message}`);
  };
}
