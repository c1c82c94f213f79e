import test from 'ava';
import { OffsetCommitter, type PartitionOffset } from '../../src/ingress/offsetCommitter.js';

/** A send that the test releases by hand, recording each request as "partition:offset" strings. */
function gatedSend() {
  const sent: string[][] = [];
  const gates: ((ok: boolean) => void)[] = [];
  return {
    sent,
    send: (offsets: PartitionOffset[]) => {
      sent.push(offsets.map((o) => `${o.topic}/${o.partition}:${o.offset}`));
      return new Promise<boolean>((r) => gates.push(r));
    },
    async release(ok = true) {
      while (gates.length === 0) await new Promise((r) => setImmediate(r));
      gates.shift()!(ok);
    },
    async requests(n: number) {
      while (sent.length < n) await new Promise((r) => setImmediate(r));
    },
  };
}

test('one commit in flight; later offsets of a partition coalesce to the newest, in order', async (t) => {
  const g = gatedSend();
  const c = new OffsetCommitter(g.send);
  const a = c.advance('t', 0, '10');
  await g.requests(1);
  const b = c.advance('t', 0, '20');
  const d = c.advance('t', 0, '30');
  t.deepEqual(g.sent, [['t/0:10']], 'only the first is sent while it is in flight');
  await g.release();
  t.true(await a);
  await g.release();
  t.true(await b, '20 is covered by the commit of 30');
  t.true(await d);
  t.deepEqual(g.sent, [['t/0:10'], ['t/0:30']], '20 was coalesced into 30; offsets never go backwards');
});

test('partitions that advance together share one request; each keeps its own newest offset', async (t) => {
  const g = gatedSend();
  const c = new OffsetCommitter(g.send);
  const first = [c.advance('t', 0, '5'), c.advance('t', 1, '7'), c.advance('u', 0, '3')];
  await g.requests(1);
  const later = [c.advance('t', 1, '9'), c.advance('t', 0, '6'), c.advance('t', 1, '12')];
  await g.release();
  await g.release();
  t.deepEqual(await Promise.all([...first, ...later]), [true, true, true, true, true, true]);
  t.deepEqual(g.sent, [
    ['t/0:5', 't/1:7', 'u/0:3'],
    ['t/1:12', 't/0:6'],
  ]);
});

test('flush waits for everything advanced so far; a refused commit is reported to every partition in it', async (t) => {
  const g = gatedSend();
  const c = new OffsetCommitter(g.send);
  const a = c.advance('t', 0, '5');
  const b = c.advance('t', 3, '8');
  let flushed = false;
  const f = c.flush().then(() => (flushed = true));
  t.false(flushed);
  await g.release(false);
  await f;
  t.true(flushed);
  t.false(await a, 'a refused commit resolves false');
  t.false(await b);
  await c.flush();
});

test('retryRefused sends once more the newest refused offset of each partition that no later commit covered', async (t) => {
  const sent: string[][] = [];
  const answers = [false, true, true];
  const c = new OffsetCommitter(async (offsets) => {
    sent.push(offsets.map((o) => `${o.topic}/${o.partition}:${o.offset}`));
    return answers.shift() ?? true;
  });
  // Refused: t/0 at 5 and t/1 at 7. Then t/1 advances to 9 and lands, which covers its refused 7.
  t.false(await Promise.all([c.advance('t', 0, '5'), c.advance('t', 1, '7')]).then((r) => r.every(Boolean)));
  t.true(await c.advance('t', 1, '9'));
  t.true(await c.retryRefused(), 'the retry landed');
  t.deepEqual(sent, [['t/0:5', 't/1:7'], ['t/1:9'], ['t/0:5']]);
  t.true(await c.retryRefused(), 'nothing left to retry');
  t.is(sent.length, 3, 'no request without refused offsets');
});
