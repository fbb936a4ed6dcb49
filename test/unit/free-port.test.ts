import { createServer } from 'node:net';
import test from 'ava';
import { ephemeralPortRange, freePort } from '../../hack/controlplane/controlplane.ts';

test('a picked port lies below the kernel ephemeral range, so no outgoing connection can take it while the API server restarts', async (t) => {
  const range = ephemeralPortRange();
  for (let i = 0; i < 20; i++) {
    const port = await freePort();
    t.true(port < range.low, `port ${port} is in the ephemeral range ${range.low}-${range.high}`);
    // And it is free: it can be bound.
    await new Promise<void>((resolve, reject) => {
      const srv = createServer();
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve()));
    });
  }
});

test('the ephemeral range is read as the kernel writes it, with its default when it cannot be read', (t) => {
  t.deepEqual(ephemeralPortRange('32768\t60999\n'), { low: 32768, high: 60999 });
  t.deepEqual(ephemeralPortRange('1024 65535'), { low: 1024, high: 65535 });
  t.deepEqual(ephemeralPortRange(''), { low: 32768, high: 60999 });
});

test('with no room below the ephemeral range, any free port is taken', async (t) => {
  const port = await freePort({ low: 1024, high: 65535 });
  t.true(port > 0);
});
