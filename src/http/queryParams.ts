import { ValidationError } from '../errors.js';

/** A query-string integer in [min, max]; anything else is a 400 naming the parameter. */
export function queryInt(v: unknown, name: string, min: number, max: number): number {
  if (typeof v !== 'string' || !/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new ValidationError(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`, name);
  }
  return Number(v);
}
