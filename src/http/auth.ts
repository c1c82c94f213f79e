import { createHash, timingSafeEqual } from 'node:crypto';
import { AuthError } from '../errors.js';

/**
 * Bearer-token check for /api routes.
 *
 * Both sides are hashed first so timingSafeEqual always compares two 32-byte
 * digests: comparing the raw strings would leak the token's length (and
 * timingSafeEqual throws on unequal lengths).
 */
export class BearerAuth {
  private readonly expected: Buffer;

  constructor(token: string) {
    this.expected = digest(token);
  }

  /** Throws AuthError unless the Authorization header carries the token. */
  check(header: string | string[] | undefined): void {
    if (typeof header !== 'string' || header === '') throw new AuthError('missing bearer token (Authorization: Bearer <token>)');
    const match = /^Bearer[ ]+(.+)$/i.exec(header);
    if (!match) throw new AuthError('the Authorization header must use the Bearer scheme');
    if (!timingSafeEqual(digest(match[1]!.trim()), this.expected)) throw new AuthError('invalid bearer token');
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}
