// Joins two sockets both ways; when either side fails or closes, both are destroyed so neither end is left
// half open. Used by the relay inside the switch namespace and by the host-side forwarder.
import type { Socket } from 'node:net';

export function splice(client: Socket, upstream: Socket): void {
  client.pipe(upstream).pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close);
  upstream.on('error', close);
}
