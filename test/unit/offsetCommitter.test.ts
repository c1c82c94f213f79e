import test from 'ava';
import { OffsetCommitter } from '../../src/ingress/offsetCommitter.js';

/** A send that the test releases by hand, recording what was sent. */
function gatedSend() {
  const sent: string[] = [];
  const gates: ((ok: boolean) => void)[] = [];
  return {
    sent,
    send: (offset: string) => {
      sent.push(offset);
      return new Promise<boolean>((r) => gates.push(r));
    },
    async release(ok = true) {
      while (gates.length === 0) await new Promise((r) => setImmediate(r));
      gates.shift()!(ok);
    },
  };
}

test('one commit in flight; later offsets coalesce to the newest, in order', async (t) => {
  const g = gatedSend();
  const c = new OffsetCommitter(g.send);
  const a = c.advance('10');
  const b = c.advance('20');
  const d = c.advance('30');
  t.deepEqual(g.sent, ['10'], 'only the first is sent while it is in flight');
  await g.release();
  t.true(await a);
  await g.release();
  t.true(await b, '20 is covered by the commit of 30');
  t.true(await d);
  t.deepEqual(g.sent, ['10', '30'], '20 was coalesced into 30; offsets never go backwards');
});

test('flush waits for everything advanced so far; a refused commit is reported', async (t) => {
  const g = gatedSend();
  const c = new OffsetCommitter(g.send);
  const a = c.advance('5');
  let flushed = false;
  const f = c.flush().then(() => (flushed = true));
  t.false(flushed);
  await g.release(false);
  await f;
  t.true(flushed);
  t.false(await a, 'a refused commit resolves false');
  await c.flush();
});
