// Events at scale: a controller that reserves thousands of NodeDisks at its first start must not post
// thousands of Events (client-go's EventCorrelator: a token bucket per source, similar events combined).
import { createServer } from 'node:http';
import test from 'ava';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { EventRecorder, eventName, refOf } from '../../controller/events.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { tokenAccess } from './_access.ts';

const silent = createLogger('test', { write: () => {} });
const disk = (i: number): NodeDisk => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name: `d${i}`, uid: `uid-${i}`, resourceVersion: String(i) },
  spec: { nodeName: 'n', diskID: `d${i}`, path: `/d/d${i}.img` },
});

interface Posted {
  url: string;
  reason: string;
  note: string;
  regarding: { name: string; kind: string; namespace?: string };
  related?: { name: string };
}

async function eventServer() {
  const posted: Posted[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.method === 'POST') posted.push({ ...(JSON.parse(body) as Posted), url: req.url ?? '' });
      res.setHeader('Content-Type', 'application/json');
      res.end(body || '{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    posted,
    rest: new RestClient(tokenAccess(url, 't')),
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

const until = async (what: string, cond: () => boolean, ms = 20_000) => {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`not reached: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

test('a burst of 1,000 events for 1,000 NodeDisks posts the burst, then one combined event, not 1,000', async (t) => {
  const srv = await eventServer();
  t.teardown(srv.close);
  const recorder = new EventRecorder(srv.rest, 'unit', silent, { burst: 25, refillMs: 200 });
  await Promise.all(Array.from({ length: 1000 }, (_, i) => recorder.record(disk(i), 'Normal', 'AutoReserved', 'Reserve', `reserved d${i}`)));
  // The rest are not lost: they come as one combined event once a token is back (which, on a loaded
  // machine, may be before the burst's own posts have all been answered: so count by kind, not by time).
  const isCombined = (e: { note: string }) => e.note.startsWith('(combined from similar events)');
  await until('a combined event', () => srv.posted.some(isCombined));
  t.is(srv.posted.filter((e) => !isCombined(e)).length, 25, 'the burst, posted one by one');
  const combined = srv.posted.filter(isCombined);
  t.is(combined.length, 1);
  t.regex(combined[0]!.note, /^\(combined from similar events\): 975 NodeDisks, the last d999: reserved d999/);
  t.is(combined[0]!.reason, 'AutoReserved');
  t.is(combined[0]!.regarding.name, 'd999');
  recorder.close();
});

test('events of a different reason are combined apart, and a quiet recorder posts each event at once', async (t) => {
  const srv = await eventServer();
  t.teardown(srv.close);
  const recorder = new EventRecorder(srv.rest, 'unit', silent, { burst: 2, refillMs: 100 });
  // All at once (in one tick), as workers record them.
  await Promise.all([
    recorder.record(disk(1), 'Normal', 'AutoReserved', 'Reserve', 'one'),
    recorder.record(disk(2), 'Normal', 'AutoReserved', 'Reserve', 'two'),
    recorder.record(disk(3), 'Normal', 'AutoReserved', 'Reserve', 'three'),
    recorder.record(disk(4), 'Warning', 'ReservedByOther', 'PolicyRejected', 'four'),
  ]);
  t.is(srv.posted.length, 2);
  await until('two combined events', () => srv.posted.length === 4);
  t.deepEqual(
    srv.posted
      .slice(2)
      .map((e) => [e.reason, e.regarding.name])
      .sort(),
    [
      ['AutoReserved', 'd3'],
      ['ReservedByOther', 'd4'],
    ],
  );
  // Quiet again: a single event goes out as it is.
  await new Promise((r) => setTimeout(r, 500));
  await recorder.record(disk(5), 'Normal', 'AutoReleased', 'Release', 'five');
  t.is(srv.posted.at(-1)?.note, 'five');
  recorder.close();
});

test("claims' events go to their namespace, with a bucket each: one team's storm neither delays nor joins another's events", async (t) => {
  const srv = await eventServer();
  t.teardown(srv.close);
  // A token back every 2 s: the assertions before the combined event are not a race with it.
  const recorder = new EventRecorder(srv.rest, 'unit', silent, { burst: 2, refillMs: 2000 });
  t.teardown(() => recorder.close());
  const claim = (ns: string, name: string) => ({
    apiVersion: 'localtest.example.com/v1alpha1' as const,
    kind: 'NodeDiskClaim' as const,
    metadata: { name, namespace: ns, uid: `u-${name}` },
    spec: {},
  });
  await Promise.all(Array.from({ length: 50 }, (_, i) => recorder.recordAbout(refOf(claim('busy', `c${i}`), 'NodeDiskClaim'), refOf(disk(i)), 'Normal', 'Bound', 'Bind', `bound to d${i}`)));
  const inNs = (ns: string) => srv.posted.filter((e) => e.url === `/apis/events.k8s.io/v1/namespaces/${ns}/events`);
  t.is(inNs('busy').length, 2);
  t.like(inNs('busy')[0], { regarding: { kind: 'NodeDiskClaim', namespace: 'busy', name: 'c0' }, related: { name: 'd0' } });
  // Another namespace, at once and alone; and a NodeDisk's event, in "default", at once too.
  await recorder.recordAbout(refOf(claim('quiet', 'db'), 'NodeDiskClaim'), undefined, 'Warning', 'FailedBinding', 'Bind', '0/1 disks fit: 1 reserved');
  await recorder.record(disk(99), 'Normal', 'AutoReserved', 'Reserve', 'reserved d99');
  t.like(inNs('quiet'), [{ note: '0/1 disks fit: 1 reserved', regarding: { kind: 'NodeDiskClaim', namespace: 'quiet', name: 'db' } }]);
  t.like(inNs('default'), [{ regarding: { kind: 'NodeDisk', name: 'd99' } }]);
  await until('the combined event of the busy namespace', () => inNs('busy').length === 3);
  t.like(inNs('busy')[2], { note: '(combined from similar events): 48 NodeDiskClaims, the last c49: bound to d49', related: { name: 'd49' } });
});

test('an Event name fits 253 characters whatever the NodeDisk name, and names of objects cut alike still differ', (t) => {
  const long = (tail: string) => `${'a'.repeat(236)}.${tail}`;
  const a = eventName(long('x'.repeat(16)), 0x18f00000000, 'beef');
  const b = eventName(long('y'.repeat(16)), 0x18f00000000, 'beef');
  for (const n of [a, b]) {
    t.true(n.length <= 253, n);
    t.regex(n, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'a DNS subdomain: no label ends in . or -');
  }
  t.not(a, b);
  t.true(a.startsWith('a'.repeat(200)));
  t.is(eventName('node-a-disk1', 0x18f00000000, 'beef'), 'node-a-disk1.18f00000000beef', "client-go's <object>.<hex time> when it fits");
});
