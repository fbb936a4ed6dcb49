// A plugin a user can trust on a shared terminal, run by the real kubectl against the real API server, and
// compared with what the real kubectl does for the same input: text from the cluster reaches the terminal
// escaped; an exec credential command is found as client-go finds it, never in the current directory; a
// name kubectl refuses is refused; and `status` judges agents by their heartbeat Leases, as the controller
// does, and says so when it may not read them.
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { dump, load } from 'js-yaml';
import { FIELD_MANAGER } from '../../api/constants.ts';
import { DEFAULT_SYSTEM_NAMESPACE } from '../../api/constants.ts';
import { heartbeatLeaseName, HEARTBEAT_LABEL_VALUE, LABEL_HEARTBEAT } from '../../api/heartbeat-lease.ts';
import { microTime } from '../../lib/kube/lease.ts';
import { nodeDiskName } from '../../api/names.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { newNodeDisk } from '../../hack/lib/nodedisks.ts';
import type { ExecResult } from '../harness/exec.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const BIN = join(REPO_ROOT, 'dist', 'bin');
let work = '';
let dirs = 0;

/** Runs `file` with exactly this environment (plus PATH with the plugin), in `cwd`. */
function exec(file: string, args: string[], o: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<ExecResult> {
  return new Promise((resolve) => {
    execFile(file, args, { env: { PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: controlPlane().admin().kubeconfig, ...o.env }, cwd: o.cwd ?? work, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}
const kubectl = (args: string[], o: { env?: NodeJS.ProcessEnv; cwd?: string } = {}) => exec('kubectl', args, o);
const nd = (...args: string[]) => kubectl(['nodedisks', ...args]);
const newDir = (what: string) => {
  const d = join(work, `${what}-${dirs++}`);
  mkdirSync(d, { recursive: true });
  return d;
};

/** A NodeDisk created and reported by its node's agent, as admission requires, with this status.node. */
async function reported(node: string, disk: string, status: { phase: 'Available' | 'Error'; message?: string; lastSeenTime: string }): Promise<string> {
  const cp = controlPlane();
  const agent = nodeDisksFor(await cp.agent(node));
  const name = nodeDiskName(node, disk);
  await agent.create(newNodeDisk(node, disk), { fieldManager: FIELD_MANAGER.agent });
  await agent.applyStatus(
    { apiVersion: 'localtest.example.com/v1alpha1', kind: 'NodeDisk', metadata: { name }, status: { node: { capacityBytes: 1024 * 1024, ...status } } },
    { fieldManager: FIELD_MANAGER.agent, force: true },
  );
  return name;
}

/** A heartbeat Lease for `node`, renewed at `renewed`, as the agent writes it. */
async function heartbeat(node: string, renewed: Date, durationSeconds = 40): Promise<void> {
  const lease = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: heartbeatLeaseName(node), namespace: DEFAULT_SYSTEM_NAMESPACE, labels: { [LABEL_HEARTBEAT]: HEARTBEAT_LABEL_VALUE } },
    spec: { holderIdentity: node, leaseDurationSeconds: durationSeconds, renewTime: microTime(renewed) },
  };
  await controlPlane().kubectl(controlPlane().admin(), ['apply', '--server-side', '--field-manager', 'trust-test', '-f', '-'], JSON.stringify(lease));
}

const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);
const seconds = (d: Date) => d.toISOString().replace(/\.\d+Z$/, 'Z');

test.serial.before(async () => {
  if (!existsSync(join(BIN, 'kubectl-nodedisks'))) throw new Error('run npm run build first (npm test does)');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-trust-'));
});
test.after.always(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

// OSC 52 (set the clipboard), then erase the line and return to its start to print a fake one.
const HOSTILE = 'cannot open\x1b]52;c;ZWNobyBwd25lZA==\x07 disk\x1b[2K\rReady: True (all good)';

test.serial('a status message with escape sequences reaches the terminal escaped, in status and in list as kubectl escapes it', async (t) => {
  const name = await reported('node-t1', 'disk1', { phase: 'Error', message: HOSTILE, lastSeenTime: seconds(new Date()) });
  const status = await nd('status', name);
  t.is(status.code, 0, status.stderr);
  t.notRegex(status.stdout, /[\x00-\x09\x0b-\x1f\x7f]/, 'no control character but the newlines of the layout');
  t.regex(status.stdout, /Reported:\s+Error: cannot open\^\[\]52;c;ZWNobyBwd25lZA==\\x07 disk\^\[\[2K\\rReady: True \(all good\)\n/);

  // The same cell in kubectl's own printers: byte-equal, whatever kubectl leaves or escapes.
  for (const args of [
    ['-o', 'custom-columns=NAME:.metadata.name,MESSAGE:.status.node.message'],
    ['--sort-by', '.metadata.name', '-o', 'custom-columns=MESSAGE:.status.node.message'],
  ]) {
    const ours = await nd('list', name, ...args);
    const theirs = await kubectl(['get', 'nodedisks', name, ...args]);
    t.is(theirs.code, 0, theirs.stderr);
    t.is(ours.code, 0, ours.stderr);
    t.is(ours.stdout, theirs.stdout, args.join(' '));
    t.notRegex(ours.stdout, /\x1b/, 'no ESC reaches the terminal');
  }
  // -o jsonpath prints the value as it is, as kubectl does: a template is asked for data.
  const jsonpath = ['-o', 'jsonpath={.status.node.message}'];
  t.is((await nd('list', name, ...jsonpath)).stdout, (await kubectl(['get', 'nodedisks', name, ...jsonpath])).stdout);
  // -o json/yaml are data: escaped by the encoders themselves, as kubectl's.
  for (const o of ['json', 'yaml']) {
    const ours = await nd('list', name, '-o', o);
    t.notRegex(ours.stdout, /[\x1b\x07\r]/, o);
    t.is(ours.stdout, (await kubectl(['get', 'nodedisks', name, '-o', o])).stdout, o);
  }
});

test.serial("list . and other names kubectl refuses are refused with kubectl's words, not answered with every NodeDisk", async (t) => {
  await reported('node-t2', 'disk1', { phase: 'Available', lastSeenTime: seconds(new Date()) });
  for (const bad of ['.', '..', 'a%2Fb']) {
    const ours = await nd('list', bad);
    const theirs = await kubectl(['get', 'nodedisks', bad]);
    t.not(theirs.code, 0, `kubectl get nodedisks ${bad}`);
    t.not(ours.code, 0, `list ${bad}`);
    t.is(ours.stdout, '', `list ${bad} prints nothing`);
    t.is(ours.stderr, theirs.stderr, `list ${bad}`);
  }
  for (const command of [
    ['status', '.'],
    ['wait', '.', '--for=phase=Available', '--timeout=1s'],
    ['reserve', '..', '--owner', 'x'],
  ]) {
    const r = await nd(...command);
    t.is(r.code, 2, command.join(' '));
    t.regex(r.stderr, /^error: invalid resource name "\.\.?": \[may not be '\.\.?'\]\n$/, command.join(' '));
  }
});

test.serial('status judges agents by their heartbeat Leases: an old report with a fresh Lease is ok, an expired Lease is STALE', async (t) => {
  const old = seconds(minutesAgo(60));
  // Quiet nodes: no report changed for an hour (lastSeenTime moves only on a change).
  await reported('node-t3-alive', 'disk1', { phase: 'Available', lastSeenTime: old });
  await reported('node-t3-dead', 'disk1', { phase: 'Available', lastSeenTime: old });
  await reported('node-t3-nolease', 'disk1', { phase: 'Available', lastSeenTime: old });
  await reported('node-t3-fresh-nolease', 'disk1', { phase: 'Available', lastSeenTime: seconds(new Date()) });
  // Long enough to outlast the nine plugin runs below on a loaded machine (each a kubectl start).
  await heartbeat('node-t3-alive', new Date(), 300);
  await heartbeat('node-t3-dead', minutesAgo(2));
  const agentColumn = async (node: string, ...flags: string[]) => {
    const r = await nd('status', '--node', node, ...flags);
    t.is(r.code, 0, r.stderr);
    return { column: r.stdout.split('\n')[1]?.trim().split(/\s+/).pop(), stderr: r.stderr };
  };
  t.is((await agentColumn('node-t3-alive')).column, 'ok', 'a fresh Lease: alive, however old the last report');
  t.is((await agentColumn('node-t3-dead')).column, 'STALE', 'its Lease expired (40 s) two minutes ago');
  t.is((await agentColumn('node-t3-nolease')).column, 'STALE', 'no Lease (an agent from before heartbeats): judged by its last report, as the controller does');
  t.is((await agentColumn('node-t3-fresh-nolease')).column, 'ok');
  t.is((await agentColumn('node-t3-alive', '--agent-lease-namespace', 'elsewhere')).column, 'STALE', 'Leases are read from the namespace asked for');
  // status NAME says the same of the disk's agent, in words.
  const agentLine = async (node: string) => {
    const r = await nd('status', `node-disk-${node}-disk1`);
    t.is(r.code, 0, r.stderr);
    return /^ {2}Agent: +(.*)$/m.exec(r.stdout)?.[1];
  };
  t.regex((await agentLine('node-t3-alive')) ?? '', /^alive: heartbeat renewed \d+s ago$/);
  t.regex((await agentLine('node-t3-dead')) ?? '', /^STALE: heartbeat not renewed for 2m\d*s? \(it lapses after 40s\)$/);
  t.regex((await agentLine('node-t3-nolease')) ?? '', /^STALE: no heartbeat Lease, and no report for 60m/);
  t.regex((await agentLine('node-t3-fresh-nolease')) ?? '', /^alive: no heartbeat Lease, but a report \d+s ago$/);
});

test.serial('a user who may not read the Leases is told AGENT is unknown and which Role to ask for; with it, status judges by the Lease', async (t) => {
  const cp = controlPlane();
  await reported('node-t4', 'disk1', { phase: 'Available', lastSeenTime: seconds(minutesAgo(60)) });
  await heartbeat('node-t4', new Date());
  await cp.kubectl(cp.admin(), ['create', 'clusterrolebinding', 'trust-viola-viewer', '--clusterrole=nodedisks-viewer', '--user=viola']);
  const asViola = () => nd('status', '--node', 'node-t4', '--as', 'viola');
  const denied = await asViola();
  t.is(denied.code, 0, denied.stderr);
  t.regex(denied.stdout, /\nnode-t4\s.*\sunknown\n$/);
  t.regex(
    denied.stderr,
    /^AGENT is unknown: cannot read the agents' heartbeat Leases in namespace node-disks-system \(leases\.coordination\.k8s\.io is forbidden: User "viola" cannot list resource "leases".*\); ask your cluster admin for the nodedisks-heartbeat-viewer Role there \(kubectl create rolebinding -n node-disks-system .*--role=nodedisks-heartbeat-viewer/,
  );
  await cp.kubectl(cp.admin(), ['create', 'rolebinding', '-n', DEFAULT_SYSTEM_NAMESPACE, 'trust-viola-heartbeats', '--role=nodedisks-heartbeat-viewer', '--user=viola']);
  const allowed = await asViola();
  t.is(allowed.code, 0, allowed.stderr);
  t.regex(allowed.stdout, /\nnode-t4\s.*\sok\n$/);
  t.is(allowed.stderr, '');
  const one = await nd('status', 'node-disk-node-t4-disk1', '--as', 'viola');
  t.regex(one.stdout, /^ {2}Agent: +alive: heartbeat renewed \d+s ago$/m);
});

/** A kubeconfig in its own directory whose user runs `command` for its token. */
function execKubeconfig(dir: string, command: string): string {
  const admin = load(readFileSync(controlPlane().admin().kubeconfig, 'utf8')) as { clusters: unknown[] };
  const path = join(dir, 'kubeconfig.yaml');
  writeFileSync(
    path,
    dump({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: admin.clusters,
      users: [{ name: 'exec-user', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command, interactiveMode: 'Never' } } }],
      contexts: [{ name: 'exec', context: { cluster: (admin.clusters[0] as { name: string }).name, user: 'exec-user' } }],
      'current-context': 'exec',
    }),
  );
  return path;
}

/** An executable that answers with `token` and leaves `marker` behind, so a test knows it ran. */
function script(path: string, token: string, marker: string): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, `#!/bin/sh\ntouch '${marker}'\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"${token}"}}'\n`);
  chmodSync(path, 0o755);
}

test.serial("a relative exec command is run from the kubeconfig's directory, never from the current one, as kubectl runs it", async (t) => {
  const token = controlPlane().admin().token;
  const home = newDir('kubeconfig-home');
  const cwd = newDir('somewhere-else');
  const kubeconfig = execKubeconfig(home, 'bin/get-token');
  script(join(home, 'bin', 'get-token'), token, join(home, 'ran'));
  script(join(cwd, 'bin', 'get-token'), 'planted', join(cwd, 'ran'));
  for (const [who, args] of [
    ['kubectl', ['get', 'nodedisks', '-o', 'name']],
    ['plugin', ['nodedisks', 'list', '-o', 'name']],
  ] as const) {
    const r = await kubectl([...args], { cwd, env: { KUBECONFIG: kubeconfig } });
    t.is(r.code, 0, `${who}: ${r.stderr}`);
    t.true(existsSync(join(home, 'ran')), `${who} ran the kubeconfig's bin/get-token`);
    t.false(existsSync(join(cwd, 'ran')), `${who} ran nothing from the current directory`);
    rmSync(join(home, 'ran'), { force: true });
  }
});

test.serial('a bare exec command is looked up in PATH, and one found through a relative PATH entry is refused, as kubectl refuses it', async (t) => {
  const token = controlPlane().admin().token;
  const home = newDir('kubeconfig-home');
  const cwd = newDir('somewhere-else');
  const onPath = newDir('on-path');
  const kubeconfig = execKubeconfig(home, 'nd-get-token');
  script(join(cwd, 'nd-get-token'), 'planted', join(cwd, 'ran'));
  script(join(onPath, 'nd-get-token'), token, join(onPath, 'ran'));
  const path = (first: string) => `${first}:${BIN}:${process.env.PATH}`;
  for (const [who, args] of [
    ['kubectl', ['get', 'nodedisks', '-o', 'name']],
    ['plugin', ['nodedisks', 'list', '-o', 'name']],
  ] as const) {
    const dot = await kubectl([...args], { cwd, env: { KUBECONFIG: kubeconfig, PATH: path('.') } });
    t.not(dot.code, 0, `${who} with . first in PATH`);
    // client-go says it found none; the plugin says why it ran none.
    t.regex(
      dot.stderr,
      who === 'kubectl'
        ? /exec: executable nd-get-token not found/
        : /^error: exec credential plugin nd-get-token: cannot run executable found relative to current directory \(nd-get-token, through PATH entry "\."\); give exec\.command as an absolute path/,
      who,
    );
    t.false(existsSync(join(cwd, 'ran')), `${who} ran nothing from the current directory`);
    const found = await kubectl([...args], { cwd, env: { KUBECONFIG: kubeconfig, PATH: path(onPath) } });
    t.is(found.code, 0, `${who}: ${found.stderr}`);
    t.true(existsSync(join(onPath, 'ran')), `${who} ran the one in PATH`);
    rmSync(join(onPath, 'ran'), { force: true });
  }
});

test.serial('gitops in a checkout whose --dir leads out of it through a link writes nothing there', async (t) => {
  const repo = newDir('checkout');
  const outside = newDir('outside');
  mkdirSync(join(repo, 'clusters'));
  symlinkSync(outside, join(repo, 'clusters', 'prod'));
  const name = nodeDiskName('node-t5', 'disk1');
  const r = await kubectl(['nodedisks', 'gitops', 'reserve', name, '--dir', 'clusters/prod/nodedisks', '--offline'], { cwd: repo });
  t.is(r.code, 2, r.stderr);
  t.regex(r.stderr, /^error: --dir clusters\/prod\/nodedisks: .*clusters\/prod is a symbolic link to .*, out of the current directory; gitops never follows a link out of the checkout/);
  t.deepEqual(readdirSync(outside), [], 'nothing written through the link');
});
