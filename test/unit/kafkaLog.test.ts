import test from 'ava';
import { logLevel } from 'kafkajs';
import { pino } from 'pino';
import { kafkajsLogCreator } from '../../src/ingress/kafkaLog.js';

function capture() {
  const lines: { level: number; msg: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as { level: number; msg: string }) });
  const log = kafkajsLogCreator(logger)(logLevel.WARN);
  const entry = (level: logLevel, message: string, extra: Record<string, unknown> = {}) =>
    log({ namespace: 'Connection', level, label: 'ERROR', log: { timestamp: '', logger: 'kafkajs', message, ...extra } });
  return { lines, entry };
}

test("a healthy start's two known-benign kafkajs error responses are info; other errors stay errors", (t) => {
  const { lines, entry } = capture();
  entry(logLevel.ERROR, 'Response Metadata(key: 3, version: 6)', { error: 'This server does not host this topic-partition' });
  entry(logLevel.ERROR, 'Response GroupCoordinator(key: 10, version: 2)', { error: 'The group coordinator is not available' });
  entry(logLevel.ERROR, 'Response Produce(key: 0, version: 7)', { error: 'This server does not host this topic-partition' });
  entry(logLevel.ERROR, 'Response Metadata(key: 3, version: 6)', {
    error: 'Not authorized to access topics: [Topic authorization failed]',
  });
  entry(logLevel.WARN, 'something to warn about');
  entry(logLevel.ERROR, 'Crash: KafkaJSNumberOfRetriesExceeded: ...');
  t.deepEqual(
    lines.map((l) => [l.level, l.msg]),
    [
      [30, 'kafkajs: Response Metadata(key: 3, version: 6)'],
      [30, 'kafkajs: Response GroupCoordinator(key: 10, version: 2)'],
      [50, 'kafkajs: Response Produce(key: 0, version: 7)'],
      [50, 'kafkajs: Response Metadata(key: 3, version: 6)'],
      [40, 'kafkajs: something to warn about'],
    ],
  );
});
