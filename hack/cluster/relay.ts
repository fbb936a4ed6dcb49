// Forwards connections from a unix socket to a TCP address, started inside the cluster's switch
// network namespace: `node relay.ts <socket> <host> <port>`. The API server listens only inside that
// namespace; the host reaches it through the socket file (a path, which no network namespace hides)
// without any change to the host's own network namespace. Bytes pass through untouched (TLS end to end).
import { createConnection, createServer } from 'node:net';
import { rmSync } from 'node:fs';
import { splice } from './splice.ts';

const [socket, host, port] = process.argv.slice(2);
if (!socket || !host || !port) {
  console.error('usage: relay.ts <unix-socket> <host> <port>');
  process.exit(2);
}
rmSync(socket, { force: true });
const server = createServer((client) => splice(client, createConnection({ host, port: Number(port) })));
server.listen(socket);
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
