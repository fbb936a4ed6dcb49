// A request cut before any answer on a kept-alive connection ("socket hang up": the server closed the
// connection as the request left) is sent once more on a new connection; a POST never is, nor a request
// cut on a connection of its own. Against a local HTTP server that cuts the requests it is told to.
import { createServer, type IncomingMessage } from 'node:http';
import test from 'ava';
import { TransportError } from '../../lib/kube/errors.ts';
import { RestClient } from '../../lib/kube/rest.ts';
import { tokenAccess } from './_access.ts';
import { listenLocal } from './_local-server.ts';

/** Answers `{"n":<count>}`, or closes the connection without a word when `cut` says so. */
async function cuttingServer(cut: (req: IncomingMessage, seen: number, onThisConnection: number) => boolean) {
  const seen: string[] = [];
  const perSocket = new WeakMap<object, number>();
  const server = createServer({ keepAlive: true }, (req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const n = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, n);
    if (cut(req, seen.length, n)) return void req.socket.destroy();
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ n: seen.length }));
  });
  return { seen, ...(await listenLocal(server)) };
}

function clientOf(url: string) {
  const errors: string[] = [];
  const client = new RestClient(tokenAccess(url, 't'), { onError: (method, err) => errors.push(`${method} ${err.message}`) });
  return { client, errors };
}

for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
  test(`a ${method} cut on a kept-alive connection is sent again on a new one, and the caller sees only the answer`, async (t) => {
    // The second request on any connection is cut: the one kept alive after the first answer.
    const server = await cuttingServer((_req, _seen, onThisConnection) => onThisConnection === 2);
    t.teardown(server.close);
    const { client, errors } = clientOf(server.url);
    t.teardown(() => client.close());
    t.deepEqual(await client.request(method, '/first', method === 'GET' || method === 'DELETE' ? {} : { body: { a: 1 } }), { n: 1 });
    t.deepEqual(await client.request(method, '/second', method === 'GET' || method === 'DELETE' ? {} : { body: { a: 1 } }), { n: 3 });
    t.deepEqual(server.seen, [`${method} /first`, `${method} /second`, `${method} /second`]);
    t.deepEqual(errors, []);
  });
}

test('a POST cut on a kept-alive connection is not sent again: the server may have acted on it', async (t) => {
  const server = await cuttingServer((_req, _seen, onThisConnection) => onThisConnection === 2);
  t.teardown(server.close);
  const { client, errors } = clientOf(server.url);
  t.teardown(() => client.close());
  await client.request('POST', '/first', { body: {} });
  await t.throwsAsync(client.request('POST', '/second', { body: {} }), { instanceOf: TransportError });
  t.deepEqual(server.seen, ['POST /first', 'POST /second']);
  t.is(errors.length, 1);
});

test('a request is sent again once at most: cut again on its new connection, it fails with the transport error', async (t) => {
  // Every request after the first is cut, on whichever connection.
  const server = await cuttingServer((_req, seen) => seen > 1);
  t.teardown(server.close);
  const { client, errors } = clientOf(server.url);
  t.teardown(() => client.close());
  await client.request('GET', '/first');
  const err = await t.throwsAsync(client.request('GET', '/second'), { instanceOf: TransportError });
  t.regex(err?.message ?? '', /socket hang up|ECONNRESET/);
  t.deepEqual(server.seen, ['GET /first', 'GET /second', 'GET /second']);
  t.is(errors.length, 1);
});

test('a request cut on a connection of its own is not sent again', async (t) => {
  const server = await cuttingServer(() => true);
  t.teardown(server.close);
  const { client } = clientOf(server.url);
  t.teardown(() => client.close());
  await t.throwsAsync(client.request('GET', '/only'), { instanceOf: TransportError });
  t.deepEqual(server.seen, ['GET /only']);
});
