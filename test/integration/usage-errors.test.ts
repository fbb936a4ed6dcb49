// Bad flags of the real processes (both daemons and the bundled plugin): a clear message naming the flag
// and the fix, exit 2, and never a stack trace. No cluster is needed: every case fails before any API call.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { AGENT_MAIN, CONTROLLER_MAIN } from '../../hack/lib/programs.ts';

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  return new Promise((resolve) => {
    execFile(file, args, { env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

// A kubeconfig pointing at nothing: the daemons load it at start-up but fail on their flags before using it.
const dir = mkdtempSync(join(tmpdir(), 'nodedisks-usage-'));
test.after.always(() => rmSync(dir, { recursive: true, force: true }));
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(
  kubeconfig,
  'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
);

const DAEMONS = [
  { name: 'agent', main: AGENT_MAIN, args: ['--node-name=node-a', `--disk-dir=${dir}`] },
  { name: 'controller', main: CONTROLLER_MAIN, args: ['--leader-elect=false'] },
];
const daemon = (d: (typeof DAEMONS)[number], address: string) => run(process.execPath, [d.main, `--kubeconfig=${kubeconfig}`, ...d.args, `--http-address=${address}`]);

let busy: Server;
let busyPort = 0;
test.before(async () => {
  busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', () => resolve()));
  const addr = busy.address();
  busyPort = typeof addr === 'object' && addr ? addr.port : 0;
});
test.after.always(() => busy.close());

const NO_STACK = /^\s+at /m;

for (const d of DAEMONS) {
  test(`${d.name}: --http-address on a port in use exits 2 and says which`, async (t) => {
    const r = await daemon(d, `127.0.0.1:${busyPort}`);
    t.is(r.code, 2, r.stderr);
    t.regex(r.stderr, new RegExp(`--http-address 127\\.0\\.0\\.1:${busyPort}: the port is already in use`));
    t.notRegex(r.stderr, NO_STACK);
  });

  test(`${d.name}: --http-address with port 99999 exits 2 before starting`, async (t) => {
    const r = await daemon(d, ':99999');
    t.is(r.code, 2, r.stderr);
    t.regex(r.stderr, /--http-address ":99999": the port must be 0-65535/);
    t.notRegex(r.stderr, NO_STACK);
  });

  test(`${d.name}: --http-address on an address of another machine exits 2 and says so`, async (t) => {
    // 192.0.2.0/24 is TEST-NET-1: never an address of this machine.
    const r = await daemon(d, '192.0.2.1:8080');
    t.is(r.code, 2, r.stderr);
    t.regex(r.stderr, /--http-address "192\.0\.2\.1:8080": 192\.0\.2\.1 is not an address of this machine/);
    t.notRegex(r.stderr, NO_STACK);
  });
}

const PLUGIN = join(REPO_ROOT, 'dist', 'bin', 'kubectl-nodedisks');
const plugin = (...args: string[]) => run(PLUGIN, args, { KUBECONFIG: kubeconfig });

test('plugin: every bad flag value is a usage error (exit 2), whichever flag it is', async (t) => {
  for (const args of [
    ['status', '--stale-after=abc'],
    ['wait', 'x', '--for=phase=Reserved', '--timeout=abc'],
    ['list', '--request-timeout=abc'],
    ['list', '--chunk-size=0'],
    ['list', '-o', 'jsonpath={range .items[*]}'],
  ]) {
    const r = await plugin(...args);
    t.is(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    t.regex(r.stderr, /^error: /, args.join(' '));
    t.notRegex(r.stderr, NO_STACK);
  }
});
