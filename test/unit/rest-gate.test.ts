// The REST client's gate and term signal, against a local HTTP server that counts what reaches it: a
// request the gate refuses never arrives, the gate is asked again once the connection is ready (a new
// connection can take long), and aborting the client's signal cancels what is in flight.
import { createServer, type ServerResponse } from 'node:http';
import test from 'ava';
import { RestClient } from '../../lib/kube/rest.ts';
import { tokenAccess } from './_access.ts';
import { listenLocal } from './_local-server.ts';

class Refused extends Error {
  override name = 'Refused';
}

async function countingServer(answer = true) {
  const seen: string[] = [];
  const hung: ServerResponse[] = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    if (!answer) return void hung.push(res);
    res.setHeader('Content-Type', 'application/json');
    res.end('{"ok":true}');
  });
  return { seen, ...(await listenLocal(server)) };
}

test("a request the gate refuses never reaches the server, and fails with the gate's own error", async (t) => {
  const srv = await countingServer();
  t.teardown(srv.close);
  const rest = new RestClient(tokenAccess(srv.url, 't')).with({
    gate: () => {
      throw new Refused('not now');
    },
  });
  await t.throwsAsync(rest.request('PATCH', '/x', { body: { a: 1 } }), { instanceOf: Refused });
  t.deepEqual(srv.seen, []);
});

test('the gate is asked again when the connection is ready, and a refusal then sends nothing', async (t) => {
  const srv = await countingServer();
  t.teardown(srv.close);
  let calls = 0;
  const rest = new RestClient(tokenAccess(srv.url, 't')).with({
    gate: () => {
      if (++calls > 1) throw new Refused('changed while connecting');
    },
  });
  await t.throwsAsync(rest.request('PATCH', '/x', { body: { a: 1 } }), { instanceOf: Refused });
  t.is(calls, 2);
  await new Promise((r) => setTimeout(r, 100));
  t.deepEqual(srv.seen, []);
});

test('an allowing gate lets requests through, on new and kept-alive connections alike', async (t) => {
  const srv = await countingServer();
  t.teardown(srv.close);
  let calls = 0;
  const rest = new RestClient(tokenAccess(srv.url, 't')).with({ gate: () => void calls++ });
  t.deepEqual(await rest.request('GET', '/a'), { ok: true });
  t.deepEqual(await rest.request('GET', '/b'), { ok: true });
  t.is(calls, 4);
  t.deepEqual(srv.seen, ['GET /a', 'GET /b']);
});

test("aborting the client's signal cancels requests in flight", async (t) => {
  const srv = await countingServer(false);
  t.teardown(srv.close);
  const term = new AbortController();
  const rest = new RestClient(tokenAccess(srv.url, 't'), { timeoutMs: 10_000 }).with({ signal: term.signal });
  const pending = rest.request('GET', '/slow');
  while (srv.seen.length === 0) await new Promise((r) => setTimeout(r, 10)); // in flight: the server has it
  const started = Date.now();
  term.abort();
  await t.throwsAsync(pending, { name: 'AbortError' });
  t.true(Date.now() - started < 5000, 'cancelled, not timed out');
  await t.throwsAsync(rest.request('GET', '/after'), { name: 'AbortError' }, 'nothing leaves once the term is over');
  t.deepEqual(srv.seen, ['GET /slow']);
});
