import test from 'ava';
import { PopWaiters } from '../../src/read/waiters.js';

test('a ticket counts as parked only while it waits: not before its wait, not after its wake', async (t) => {
  const w = new PopWaiters();
  const ticket = w.ticket('q');
  t.is(w.size, 1, 'registered before the pop query runs');
  t.is(w.parked, 0, 'not parked while its query would still run');
  const waiting = ticket.wait(60_000);
  t.is(w.parked, 1);
  t.is(w.wake('q'), 1);
  t.true(await waiting, 'woken, not timed out');
  t.is(w.parked, 0);
  t.is(w.size, 0);
});

test('a wake before the wait marks the ticket: the wait returns at once and never parks', async (t) => {
  const w = new PopWaiters();
  const ticket = w.ticket('q');
  t.is(w.wake('q'), 1);
  t.true(await ticket.wait(60_000));
  t.is(w.parked, 0);
});
