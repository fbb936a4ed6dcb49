// The running cluster's control socket (<dataDir>/control.sock): one line in ("stop <node>", "start
// <node>", "restart-kubelet|stop-kubelet|start-kubelet <node>" or "images"), one line out ("ok …" or
// "error: …"), so that a test or a person can reboot one node, stop or restart its kubelet, or load newly
// built images while `npm run cluster` keeps owning every process (its teardown then
// ends them all, as always).
import { createConnection, createServer, type Server } from 'node:net';
import { join } from 'node:path';

export const controlSocket = (dataDir: string) => join(dataDir, 'control.sock');
export const NODE_ACTIONS = ['stop', 'start', 'restart-kubelet', 'stop-kubelet', 'start-kubelet'] as const;
export type NodeAction = (typeof NODE_ACTIONS)[number];

export interface ControlHandlers {
  node(action: NodeAction, node: string): Promise<void>;
  /** Builds the images from dist/ again and imports them into every node; says what it loaded. */
  images(): Promise<string>;
}

export function serveControl(dataDir: string, handle: ControlHandlers): Promise<Server> {
  const server = createServer((conn) => {
    let buf = '';
    conn.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const [action, node] = buf.slice(0, nl).trim().split(/\s+/);
      const reply = (line: string) => conn.end(`${line}\n`);
      const failed = (err: Error) => reply(`error: ${err.message.replaceAll('\n', ' ')}`);
      if (action === 'images' && !node) return void handle.images().then((what) => reply(`ok ${what}`), failed);
      if (!NODE_ACTIONS.includes(action as NodeAction) || !node) return reply(`error: expected "${NODE_ACTIONS.join('|')} <node>" or "images", got "${buf.slice(0, nl)}"`);
      handle.node(action as NodeAction, node).then(() => reply('ok'), failed);
    });
    conn.on('error', () => {});
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(controlSocket(dataDir), () => resolve(server));
  });
}

/** Sends one command ("stop <node>", "start <node>", "images") and returns the reply line (throws with it when it is an error). */
export function sendControl(dataDir: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    const conn = createConnection(controlSocket(dataDir), () => conn.write(`${command}\n`));
    conn.on('data', (d: Buffer) => (out += d.toString()));
    conn.on('error', (err) => reject(new Error(`cannot reach the local cluster's control socket ${controlSocket(dataDir)}: ${err.message}`)));
    conn.on('end', () => (out.startsWith('ok') ? resolve(out.trim()) : reject(new Error(out.trim().replace(/^error: /, '') || 'the cluster closed the connection without a reply'))));
  });
}
