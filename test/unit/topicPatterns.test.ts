import test from 'ava';
import { loadConfig, matchTopicPatterns, parseIngressTopics } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

test('QUEEN_INGRESS_TOPICS: /regex/ entries beside names, with an optional queue and dead-letter topic', (t) => {
  const { topics, patterns } = parseIngressTopics('orders, /pay-[a-z]+/, /a{1,3}-x/:as:as-errors, /clicks\\/?/:clicks');
  t.deepEqual(topics, [{ topic: 'orders', queue: 'orders' }]);
  t.deepEqual(
    patterns.map((p) => ({ source: p.source, queue: p.queue, dlq: p.dlq })),
    [
      { source: '/pay-[a-z]+/', queue: undefined, dlq: undefined },
      // A comma inside the slashes belongs to the regex.
      { source: '/a{1,3}-x/', queue: 'as', dlq: 'as-errors' },
      // An escaped slash does not end it.
      { source: '/clicks\\/?/', queue: 'clicks', dlq: undefined },
    ],
  );
  const pay = patterns[0]!.pattern;
  // The whole name must match, as in the Java consumer and Connect's topics.regex.
  t.true(pay.test('pay-eu'));
  t.false(pay.test('pay-eu2'));
  t.false(pay.test('xpay-eu'));
  t.true(patterns[1]!.pattern.test('aaa-x'));
  t.false(patterns[1]!.pattern.test('aaaa-x'));
});

test('QUEEN_INGRESS_TOPICS: a bad pattern fails with the setting and the reason', (t) => {
  const bad: [string, RegExp][] = [
    ['/orders', /the pattern \/orders has no closing "\/"/],
    ['//', /the pattern \/\/ is empty/],
    ['/orders/i', /a pattern takes no flags/],
    ['/(orders/', /\/\(orders\/ is not a regular expression/],
    ['/a/:', /must be "\/regex\/", "\/regex\/:queue" or "\/regex\/:queue:dlq"/],
    ['/a/:q:bad dlq', /must be "\/regex\/", "\/regex\/:queue" or "\/regex\/:queue:dlq"/],
    ['/a/:q:d:x', /must be "\/regex\/", "\/regex\/:queue" or "\/regex\/:queue:dlq"/],
    ['/a.*/:q:ab', /matches its own dead-letter topic "ab"/],
    ['/a/,/a/', /names pattern \/a\/ twice/],
  ];
  for (const [raw, re] of bad) {
    const err = t.throws(() => parseIngressTopics(raw), { instanceOf: ConfigError }, raw);
    t.regex(err.message, /^QUEEN_INGRESS_TOPICS/, raw);
    t.regex(err.message, re, raw);
  }
});

test('matchTopicPatterns: whole names, first pattern wins, never a literal, internal or dead-letter topic', (t) => {
  const { topics, patterns } = parseIngressTopics('orders-b:special, /orders-.+/, /.*-b/:bees:bees-dlq');
  const names = ['orders-a', 'orders-b', 'orders-a.dlq', 'bees-dlq', '__consumer_offsets', 'x-b', 'other', 'orders-'];
  t.deepEqual(matchTopicPatterns(names, patterns, topics, '.dlq'), [
    { topic: 'orders-a', queue: 'orders-a' },
    { topic: 'x-b', queue: 'bees', dlq: 'bees-dlq' },
  ]);
  t.deepEqual(matchTopicPatterns([], patterns, topics, '.dlq'), []);
});

test('QUEEN_INGRESS_MAPPING reaches topics a pattern finds: by the pattern as written, or by a matched name', (t) => {
  const c = loadConfig({
    KAFKA_BROKERS: 'h:1',
    QUEEN_INGRESS_TOPICS: 'plain,/orders-.+/,/clicks-.+/',
    QUEEN_INGRESS_MAPPING: JSON.stringify({
      '/orders-.+/': { transactionId: 'json:/id' },
      'orders-eu': { transactionId: 'header:eventId', partition: 'constant:eu' },
      'clicks-1': { transactionId: 'key', missingId: 'offset' },
    }),
  });
  t.deepEqual(c.ingressTopics, [{ topic: 'plain', queue: 'plain' }]);
  const [orders, clicks] = c.ingressTopicPatterns;
  t.deepEqual(orders!.mapping, { transactionId: [{ jsonPointer: '/id' }], partition: { key: true }, missingId: 'dlq' });
  t.deepEqual(Object.keys(orders!.topicMappings ?? {}), ['orders-eu']);
  t.is(clicks!.mapping, undefined);
  t.deepEqual(Object.keys(clicks!.topicMappings ?? {}), ['clicks-1']);
  const found = matchTopicPatterns(['orders-eu', 'orders-us', 'clicks-1', 'clicks-2'], c.ingressTopicPatterns, c.ingressTopics, '.dlq');
  t.deepEqual(
    found.map((f) => [f.topic, f.mapping?.transactionId]),
    [
      ['clicks-1', [{ key: true }]],
      ['clicks-2', undefined],
      ['orders-eu', [{ header: 'eventId' }]],
      ['orders-us', [{ jsonPointer: '/id' }]],
    ],
  );
  // A key that is neither a topic, a pattern, nor a name a pattern matches.
  const err = t.throws(
    () =>
      loadConfig({
        KAFKA_BROKERS: 'h:1',
        QUEEN_INGRESS_TOPICS: '/orders-.+/',
        QUEEN_INGRESS_MAPPING: JSON.stringify({ payments: { transactionId: 'key' } }),
      }),
    { instanceOf: ConfigError },
  );
  t.regex(
    err.message,
    /QUEEN_INGRESS_MAPPING\["payments"\]: topic is not in QUEEN_INGRESS_TOPICS, nor matched by one of its \/regex\/ patterns/,
  );
});

test('a pattern alone turns the ingress on, and needs brokers', (t) => {
  const err = t.throws(() => loadConfig({ QUEEN_INGRESS_TOPICS: '/orders-.+/' }), { instanceOf: ConfigError });
  t.regex(err.message, /KAFKA_BROKERS is empty/);
  const c = loadConfig({ KAFKA_BROKERS: 'h:1', QUEEN_INGRESS_TOPICS: '/orders-.+/' });
  t.deepEqual(c.ingressTopics, []);
  t.is(c.ingressTopicPatterns.length, 1);
});
