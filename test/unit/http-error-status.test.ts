import test from 'ava';
import {
  AuthError,
  DatabaseError,
  LifecycleError,
  NotFoundError,
  PayloadTooLargeError,
  QueenError,
  ValidationError,
} from '../../src/errors.js';
import { OverloadedError, toHttpError } from '../../src/http/errorStatus.js';
import { BearerAuth } from '../../src/http/auth.js';

/** The one error -> status table (docs/http-api.md). */

test('typed errors map to their statuses', (t) => {
  const table: [unknown, number, string, boolean][] = [
    [new ValidationError('bad', 'options.x'), 400, 'bad_request', false],
    [new PayloadTooLargeError('big', 'payload'), 413, 'payload_too_large', false],
    [new AuthError('who'), 401, 'unauthorized', false],
    [new NotFoundError('gone'), 404, 'not_found', false],
    [new DatabaseError('down', '57P01', { retriable: true }), 503, 'unavailable', true],
    [new DatabaseError('timeout', '57014', { retriable: false }), 500, 'internal', false],
    [new OverloadedError('busy'), 503, 'unavailable', true],
    [new LifecycleError('Fusion is stopping'), 503, 'unavailable', true],
    [new QueenError('retry me', { retriable: true }), 503, 'unavailable', true],
    [
      Object.assign(new Error('Unsupported Media Type'), { statusCode: 415, code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' }),
      415,
      'unsupported_media_type',
      false,
    ],
    [Object.assign(new Error('Request body is too large'), { statusCode: 413 }), 413, 'payload_too_large', false],
    [new TypeError('a bug'), 500, 'internal', false],
    ['a string thrown', 500, 'internal', false],
  ];
  for (const [err, status, code, retriable] of table) {
    const a = toHttpError(err, 2);
    t.is(a.status, status, String(err));
    t.is(a.body.error, code);
    t.is(a.body.retriable, retriable);
    t.is<string | undefined, string | undefined>(a.headers['retry-after'], status === 503 ? '2' : undefined);
  }
});

test('client errors keep their message and field; internal errors do not leak theirs', (t) => {
  t.like(toHttpError(new ValidationError('options.dedupWindowSeconds must be an integer', 'options.dedupWindowSeconds'), 1).body, {
    message: 'options.dedupWindowSeconds must be an integer',
    field: 'options.dedupWindowSeconds',
  });
  t.is(toHttpError(new TypeError('secret internals at /srv/x.js'), 1).body.message, 'internal error');
  t.is(
    toHttpError(new DatabaseError('pushing: password authentication failed for user x', '28P01', { retriable: false }), 1).body.message,
    'internal error',
  );
  t.regex(toHttpError(new AuthError('x'), 1).headers['www-authenticate']!, /^Bearer realm=/);
});

test('bearer auth: exact token only, any length, case-insensitive scheme', (t) => {
  const auth = new BearerAuth('tok');
  t.notThrows(() => auth.check('Bearer tok'));
  t.notThrows(() => auth.check('bearer  tok'));
  for (const h of [undefined, '', 'tok', 'Bearer', 'Bearer ', 'Bearer to', 'Bearer tok2', 'Basic dG9r', ['Bearer tok']]) {
    t.throws(() => auth.check(h as string | undefined), { instanceOf: AuthError }, JSON.stringify(h));
  }
  t.throws(() => auth.check(`Bearer ${'x'.repeat(10_000)}`), { instanceOf: AuthError }, 'a very long token is compared, not a crash');
});
