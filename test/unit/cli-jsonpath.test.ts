import test from 'ava';
import { UsageError } from '../../src/cli/errors.js';
import { evalJsonPath, parseJsonPath } from '../../src/cli/jsonpath.js';

/** queenctl's -o jsonpath=TEMPLATE: kubectl's common subset, on the value -o json prints. */

const list = {
  queues: [
    { queue: 'a', partitions: 1, options: { dedupWindowSeconds: 0 }, tags: ['x', 'y'] },
    { queue: 'b', partitions: 3, options: { dedupWindowSeconds: 60 } },
    { queue: 'c', partitions: 2, options: { dedupWindowSeconds: 3600 } },
  ],
  next: null,
};

const jp = (template: string, value: unknown = list) => evalJsonPath(parseJsonPath(template), value);

test('fields, indexes, wildcards and slices; several results are joined by a space', (t) => {
  t.is(jp('{.queues[*].queue}'), 'a b c');
  t.is(jp('{.queues[0].queue}'), 'a');
  t.is(jp('{.queues[-1].queue}'), 'c');
  t.is(jp('{.queues[1:].queue}'), 'b c');
  t.is(jp('{.queues[:1].partitions}'), '1');
  t.is(jp("{.queues[1]['queue']}"), 'b');
  t.is(jp('{$.queues[2].options.dedupWindowSeconds}'), '3600');
  t.is(jp('{.queues[0].options}'), '{"dedupWindowSeconds":0}', 'objects print as JSON');
  t.is(jp('{.queues[0].tags}'), '["x","y"]');
  t.is(jp('{.next}'), 'null');
  t.is(jp('{.queues[0].*}'), 'a 1 {"dedupWindowSeconds":0} ["x","y"]');
  t.is(jp('{..dedupWindowSeconds}'), '0 60 3600', 'recursive descent');
  t.is(jp('{.}', 'plain'), 'plain');
  t.is(jp('{@}', 5), '5');
});

test('text outside braces, string literals and range...end', (t) => {
  t.is(jp('first: {.queues[0].queue}!'), 'first: a!');
  t.is(jp('{range .queues[*]}{.queue}{"\\t"}{.partitions}{"\\n"}{end}'), 'a\t1\nb\t3\nc\t2\n');
  t.is(jp("{range .queues}{.queue}{','}{end}"), 'a,b,c,', 'a range over an array walks its elements');
  t.is(jp('{range .queues[*]}{.queue}={$.next} {end}'), 'a=null b=null c=null ', '$ is still the root inside a range');
  t.is(jp('{range .queues[*]}[{range .tags[*]}{@}{end}]{end}'), '[xy][][]', 'nested ranges');
  t.is(jp('{"}"}'), '}', 'a brace inside a string does not close the expression');
});

test('filters compare a field with a literal, or test that it is there', (t) => {
  t.is(jp('{.queues[?(@.partitions > 1)].queue}'), 'b c');
  t.is(jp('{.queues[?(@.partitions>=3)].queue}'), 'b');
  t.is(jp('{.queues[?(@.queue=="c")].options.dedupWindowSeconds}'), '3600');
  t.is(jp("{.queues[?(@.queue != 'a')].queue}"), 'b c');
  t.is(jp('{.queues[?(@.options.dedupWindowSeconds == 0)].queue}'), 'a');
  t.is(jp('{.queues[?(@.tags)].queue}'), 'a');
  t.is(jp('{.queues[?(@.queue < "b")].queue}'), 'a');
});

test('a missing key prints nothing, as kubectl does by default', (t) => {
  t.is(jp('{.nope}'), '');
  t.is(jp('[{.queues[7].queue}]'), '[]');
  t.is(jp('{.queues[*].tags[0]}'), 'x');
  t.is(jp('{.queue.name}', { queue: 'string' }), '');
});

test('what is not supported is a usage error that names the offset', (t) => {
  for (const [template, why] of [
    ['{.a', /unclosed "\{"/],
    ['{range .a}x', /\{range\} without \{end\}/],
    ['x{end}', /\{end\} without \{range\}/],
    ['{a.b}', /a path starts with/],
    ['{.a[1,2]}', /unsupported "\[1,2\]"/],
    ['{.a[?(@.x == foo)]}', /compares with a string, number/],
    ['{"\\q"}', /unknown escape/],
    ['{.a[0}', /unclosed "\["/],
  ] as const) {
    const err = t.throws(() => parseJsonPath(template), { instanceOf: UsageError }, template);
    t.regex(err.message, why, template);
    t.regex(err.message, /at offset \d+/, template);
  }
});
