// kubectl nodedisks list -w behind a proxy or load balancer that ends every watch at once: a real HTTP
// server that does so, the plugin in this process. It must back off, not re-open the watch in a loop.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { NODEDISKS_PATH } from '../../api/client.ts';
import { run } from '../../plugin/cli.ts';
import type { Io } from '../../plugin/context.ts';

const temp = mkdtempSync(join(tmpdir(), 'list-watch-backoff-'));
const savedKubeconfig = process.env.KUBECONFIG;
test.before(() => {
  process.env.KUBECONFIG = join(temp, 'none'); // --server and --token say everything
});
test.after.always(() => {
  rmSync(temp, { recursive: true, force: true });
  if (savedKubeconfig === undefined) delete process.env.KUBECONFIG;
  else process.env.KUBECONFIG = savedKubeconfig;
});

test('list -w against watches that end at once with no event backs off: a bounded number of watches, not hundreds', async (t) => {
  let watches = 0;
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (u.pathname !== NODEDISKS_PATH) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json' });
    if (u.searchParams.get('watch') === 'true') {
      watches++;
      return void res.end(); // 200, then the connection's end: what a proxy closing long requests sends
    }
    res.end(JSON.stringify({ apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDiskList', metadata: { resourceVersion: '9' }, items: [] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  let err = '';
  const io: Io = { out: () => {}, err: (s) => void (err += s), progress: () => {} };
  const done = run(['list', '-w', '-o', 'name', '--server', url, '--token', 'tok'], io);
  const windowMs = 3000;
  const deadline = Date.now() + windowMs;
  while (Date.now() < deadline) await new Promise((r) => setTimeout(r, 50)); // the window: what is counted is the server's
  const counted = watches;
  // Ending the server ends the plugin: the next watch cannot connect.
  server.close();
  server.closeAllConnections();
  const code = await done;
  t.not(code, 0, err);
  // 500 ms doubling: watches near 0, 0.5, 1.5 s (and 3.5 s); without a backoff, hundreds in 3 s.
  t.true(counted >= 2, `${counted} watches: it did watch again`);
  t.true(counted <= 6, `${counted} watches in ${windowMs} ms`);
});
