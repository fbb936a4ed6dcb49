// The leader elector's clock, against a local HTTP server that can stop answering (requests accepted,
// never answered: a black hole): leadership ends at the renew deadline however long a request hangs,
// and a process that was frozen finds it over before any timer has had a chance to run.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import test from 'ava';
import { LeaderElector } from '../../lib/kube/leader-election.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { tokenAccess } from './_access.ts';

const silent = createLogger('test', { write: () => {} });
const TIMINGS = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 200 };

/** A lease endpoint: answers GET/POST/PUT like the API server while `answering`, else never answers. */
async function leaseServer() {
  let lease: Record<string, unknown> | undefined;
  let rv = 0;
  const state = { answering: true, hung: [] as ServerResponse[] };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (!state.answering) return void state.hung.push(res);
      res.setHeader('Content-Type', 'application/json');
      if (req.method === 'GET') {
        if (!lease) return void res.writeHead(404).end(JSON.stringify({ kind: 'Status', code: 404, reason: 'NotFound' }));
        return void res.end(JSON.stringify(lease));
      }
      const obj = JSON.parse(body) as { metadata: Record<string, unknown> };
      lease = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++rv) } };
      res.writeHead(req.method === 'POST' ? 201 : 200).end(JSON.stringify(lease));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    state,
    url: `http://127.0.0.1:${port}`,
    close: () => {
      for (const res of state.hung) res.destroy();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function elector(url: string): LeaderElector {
  return new LeaderElector({ rest: new RestClient(tokenAccess(url, 't'), { timeoutMs: 30_000 }), namespace: 'ns', name: 'l', identity: 'me', log: silent, ...TIMINGS });
}

test.serial('a leader whose renewals hang steps down at the renew deadline, not at the request timeout', async (t) => {
  const srv = await leaseServer();
  t.teardown(srv.close);
  const e = elector(srv.url);
  const stop = new AbortController();
  t.teardown(() => stop.abort());
  const before = performance.now(); // leadership counts from the start of the winning attempt
  t.true(await e.acquire(stop.signal));
  t.true(e.isLeader);
  srv.state.answering = false;
  const outcome = await e.hold(stop.signal);
  const held = performance.now() - before;
  t.is(outcome, 'lost');
  t.false(e.isLeader);
  t.true(held >= TIMINGS.renewDeadlineMs && held < TIMINGS.renewDeadlineMs + 1500, `stepped down after ${Math.round(held)} ms`);
  t.regex(e.problem ?? '', /cannot renew the lease ns\/l: .*request timed out/);
});

test.serial('a leader frozen past its renew deadline is not leader the moment it wakes, before any timer runs', async (t) => {
  const srv = await leaseServer();
  t.teardown(srv.close);
  const e = elector(srv.url);
  const stop = new AbortController();
  t.teardown(() => stop.abort());
  t.true(await e.acquire(stop.signal));
  void e.hold(stop.signal);
  // Block the event loop as SIGSTOP would: no timer, no renewal, no I/O.
  const until = performance.now() + TIMINGS.renewDeadlineMs + 50;
  while (performance.now() < until) {
    /* frozen */
  }
  t.false(e.isLeader);
});

test.serial('a standby that cannot reach the lease says so; one that can is fine', async (t) => {
  const srv = await leaseServer();
  t.teardown(srv.close);
  const e = elector(srv.url);
  const stop = new AbortController();
  t.teardown(() => stop.abort());
  srv.state.answering = false;
  const acquiring = e.acquire(stop.signal);
  const deadline = Date.now() + 10_000;
  while (e.problem === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.false(e.isLeader);
  t.regex(e.problem ?? '', /cannot reach the lease ns\/l: .*request timed out after \d+ ms/);
  srv.state.answering = true;
  t.true(await acquiring);
  t.is(e.problem, undefined);
});
