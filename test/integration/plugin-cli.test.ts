// The plugin's command line next to kubectl's: no-argument help, shell completion (through kubectl's
// own plugin completion and through the real bash), and what reserve/release print with -o, compared
// with what kubectl apply --server-side / kubectl patch print for the same change. The bundled plugin
// (dist/bin) is run by the real kubectl against the real API server.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { dump, load } from 'js-yaml';
import { A1, A2, B2, seed } from '../fixtures/parity-seeds.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { execResult, type ExecResult } from '../harness/exec.ts';
import { nodeDisksFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);
const BIN = join(REPO_ROOT, 'dist', 'bin');
let work = '';

const env = (kubeconfig = controlPlane().admin().kubeconfig): NodeJS.ProcessEnv => ({ PATH: `${BIN}:${process.env.PATH}`, KUBECONFIG: kubeconfig });
const kubectl = (args: string[], o: { kubeconfig?: string } = {}): Promise<ExecResult> => execResult('kubectl', args, { env: env(o.kubeconfig) });
const nd = (...args: string[]) => kubectl(['nodedisks', ...args]);

/** Candidates and directive of cobra's protocol, as kubectl's completion reads them. */
function protocol(r: ExecResult): { candidates: string[]; directive: string } {
  const lines = r.stdout.split('\n').filter(Boolean);
  const directive = lines.find((l) => l.startsWith(':')) ?? '';
  return { candidates: lines.filter((l) => !l.startsWith(':')), directive };
}
/** `kubectl nodedisks WORDS<TAB>` as kubectl's shell completion asks it (kubectl __complete …). */
const kubectlComplete = async (...words: string[]) => protocol(await kubectl(['__complete', 'nodedisks', ...words]));

test.serial.before(async () => {
  if (!existsSync(join(BIN, 'kubectl-nodedisks'))) throw new Error('run npm run build first (npm test does)');
  work = await mkdtemp(join(tmpdir(), 'nodedisks-cli-'));
  await seed(controlPlane());
});
test.after.always(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

test.serial('kubectl nodedisks with no arguments prints help on stdout and exits 0, as kubectl does', async (t) => {
  const ours = await nd();
  const theirs = await kubectl([]);
  t.is(theirs.code, 0, 'kubectl itself');
  t.is(ours.code, theirs.code, ours.stderr);
  t.regex(ours.stdout, /^kubectl nodedisks lists, inspects[\s\S]*Commands:\n {2}list /);
  t.is(ours.stderr, '');
});

test.serial('flags complete: list --sho offers --show-labels, reserve --dr offers --dry-run', async (t) => {
  t.deepEqual(await kubectlComplete('list', '--sho'), { candidates: ['--show-labels'], directive: ':4' });
  t.deepEqual((await kubectlComplete('reserve', '--dr')).candidates, ['--dry-run']);
  t.deepEqual((await kubectlComplete('status', '--kubec')).candidates, ['--kubeconfig'], 'global flags too');
  t.deepEqual((await kubectlComplete('--')).candidates, ['--help'], 'before a command only --help is accepted');
  t.true((await kubectlComplete('status', '--')).candidates.includes('--context'));
});

test.serial('flag values complete with their own kind: --node nodes, -o formats, --for, --dry-run, --kubeconfig files', async (t) => {
  t.deepEqual((await kubectlComplete('list', '--node', '')).candidates, ['node-a', 'node-b', 'node-c', 'node-long-name-for-wide-columns']);
  t.deepEqual((await kubectlComplete('reserve', '--node', 'node-')).candidates, ['node-a', 'node-b', 'node-c', 'node-long-name-for-wide-columns']);
  t.deepEqual((await kubectlComplete('list', '--node=node-b')).candidates, ['--node=node-b']);
  const formats = await kubectlComplete('list', '-o', '');
  t.deepEqual(formats.candidates, ['wide', 'json', 'yaml', 'name', 'jsonpath=', 'jsonpath-file=', 'custom-columns=', 'custom-columns-file=']);
  t.is(formats.directive, ':6', 'no space after jsonpath= and the like, no file names');
  t.deepEqual((await kubectlComplete('reserve', '-o', '')).candidates, ['yaml', 'json']);
  t.deepEqual((await kubectlComplete('reserve', '--dry-run=s')).candidates, ['--dry-run=server']);
  t.deepEqual((await kubectlComplete('wait', '--for=phase=R')).candidates, ['--for=phase=Reserved']);
  t.deepEqual((await kubectlComplete('status', '--phase', 'Av')).candidates, ['Available']);
  t.deepEqual(await kubectlComplete('list', '--kubeconfig', ''), { candidates: [], directive: ':0' }, 'the shell completes file names');
  t.deepEqual((await kubectlComplete('completion', '')).candidates, ['bash', 'zsh', 'fish', 'powershell']);
  // A flag's value is not taken for a name: `--node node-a <TAB>` completes that node's disks.
  t.deepEqual((await kubectlComplete('status', '--node', 'node-a', '')).candidates, [A1, A2, `${A1.slice(0, -1)}3`]);
});

test.serial('--context completes the contexts of the --kubeconfig given earlier, and names come from that context', async (t) => {
  const admin = load(readFileSync(controlPlane().admin().kubeconfig, 'utf8')) as {
    clusters: { name: string; cluster: Record<string, unknown> }[];
    users: unknown[];
    contexts: { name: string; context: Record<string, string> }[];
  };
  const other = join(work, 'other-kubeconfig.yaml');
  writeFileSync(
    other,
    dump({
      ...admin,
      clusters: [...admin.clusters, { name: 'nowhere', cluster: { server: 'https://127.0.0.1:1' } }],
      contexts: [...admin.contexts, { name: 'prod-eu', context: { ...admin.contexts[0]!.context } }, { name: 'staging', context: { ...admin.contexts[0]!.context, cluster: 'nowhere' } }],
      'current-context': 'staging',
    }),
  );
  t.deepEqual((await kubectlComplete('list', '--kubeconfig', other, '--context', '')).candidates, ['admin', 'prod-eu', 'staging']);
  t.deepEqual((await kubectlComplete('list', `--kubeconfig=${other}`, '--context=pro')).candidates, ['--context=prod-eu']);
  t.deepEqual((await kubectlComplete('list', '--context', '')).candidates, ['admin'], 'without --kubeconfig: KUBECONFIG');
  // Its current context (staging) reaches no server: no names; --context prod-eu reaches the cluster.
  t.deepEqual((await kubectlComplete('status', '--kubeconfig', other, 'node-disk-node-b')).candidates, []);
  t.deepEqual((await kubectlComplete('status', '--kubeconfig', other, '--context', 'prod-eu', 'node-disk-node-b')).candidates, [`${A1.replace('node-a', 'node-b')}`, B2]);
});

/** Completes `line` in a real bash with the script of `kubectl-nodedisks completion bash` loaded. */
function bashComplete(line: string): Promise<string[]> {
  // COMP_WORDS as bash makes them: broken at blanks and at its word-break characters (= and :).
  const script = `
source <(kubectl-nodedisks completion bash)
COMP_LINE=${JSON.stringify(line)}; COMP_POINT=\${#COMP_LINE}
COMP_WORDS=(); w=''
for (( i = 0; i < \${#COMP_LINE}; i++ )); do
  c=\${COMP_LINE:i:1}
  if [[ $c == ' ' ]]; then [[ -n $w ]] && COMP_WORDS+=("$w"); w=''
  elif [[ $c == '=' || $c == ':' ]]; then [[ -n $w ]] && COMP_WORDS+=("$w"); COMP_WORDS+=("$c"); w=''
  else w+=$c; fi
done
COMP_WORDS+=("$w"); COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 ))
# A lone = or : is a word of its own only while it is being typed.
[[ $w == '' && \${COMP_WORDS[COMP_CWORD-1]} =~ ^[=:]$ ]] && { unset 'COMP_WORDS[COMP_CWORD]'; COMP_CWORD=$(( COMP_CWORD - 1 )); }
_kubectl_nodedisks
printf '%s\\n' "\${COMPREPLY[@]}"
`;
  return new Promise((resolve, reject) =>
    execFile('bash', ['-c', script], { env: { ...env(), HOME: work }, cwd: work, timeout: 60_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout.split('\n').filter(Boolean)),
    ),
  );
}

test.serial('the bash script completes flags, values after = and file names in the real bash', async (t) => {
  t.deepEqual(await bashComplete('kubectl-nodedisks list --sho'), ['--show-labels']);
  t.deepEqual(await bashComplete('kubectl-nodedisks li'), ['list']);
  t.deepEqual(await bashComplete('kubectl-nodedisks status --node node-c '), [`${A1.replace('node-a', 'node-c').slice(0, -1)}10`, `${A1.replace('node-a', 'node-c').slice(0, -1)}9`]);
  // bash replaces only what follows the last = (a word break), so that is what is offered.
  t.deepEqual(await bashComplete('kubectl-nodedisks wait --for=phase=Re'), ['Reserved']);
  t.deepEqual(await bashComplete('kubectl-nodedisks list -o json'), ['json', 'jsonpath=', 'jsonpath-file=']);
  t.deepEqual(await bashComplete('kubectl-nodedisks reserve --owner x -o ya'), ['yaml']);
  writeFileSync(join(work, 'my-kubeconfig.yaml'), '');
  t.deepEqual(await bashComplete('kubectl-nodedisks list --kubeconfig my-k'), ['my-kubeconfig.yaml']);
});

test.serial('the fish and PowerShell scripts speak the same protocol (the shells are not installed here)', async (t) => {
  const fish = await nd('completion', 'fish');
  t.is(fish.code, 0);
  t.regex(fish.stdout, /kubectl-nodedisks __complete \$words/);
  t.regex(fish.stdout, /complete -c kubectl-nodedisks -f -a '\(__kubectl_nodedisks_complete\)'/);
  const pwsh = await nd('completion', 'powershell');
  t.regex(pwsh.stdout, /Register-ArgumentCompleter -Native -CommandName 'kubectl-nodedisks'/);
  // PowerShell passes "" for the empty word being completed; it means the empty word.
  t.deepEqual(protocol(await execResult(join(BIN, 'kubectl-nodedisks'), ['__complete', 'completion', '""'], { env: env() })).candidates, ['bash', 'zsh', 'fish', 'powershell']);
});

/** What kubectl prints for the same change: apply --server-side of the plugin's body, or patch of its JSON Patch. */
async function kubectlDryRun(sent: { name?: string; jsonPatch?: unknown } & Record<string, unknown>, format: 'yaml' | 'json'): Promise<ExecResult> {
  if (sent.jsonPatch) {
    return kubectl(['patch', 'nodedisk', String(sent.name), '--type=json', '-p', JSON.stringify(sent.jsonPatch), '--dry-run=server', `-o${format}`, '--field-manager=kubectl-nodedisks']);
  }
  const file = join(work, 'sent.json');
  writeFileSync(file, JSON.stringify(sent));
  return kubectl(['apply', '--server-side', '--force-conflicts', '--dry-run=server', `-o${format}`, '--field-manager=kubectl-nodedisks', '-f', file]);
}

test.serial('reserve -o yaml|json prints exactly what is sent, resourceVersion precondition included', async (t) => {
  const rv = (await nodeDisksFor(controlPlane().admin()).get(A1)).metadata.resourceVersion;
  const yaml = await nd('reserve', A1, '--owner', 'team-db', '--dry-run=client', '-o', 'yaml');
  t.is(yaml.code, 0, yaml.stderr);
  t.deepEqual(load(yaml.stdout), {
    apiVersion: 'localtest.example.com/v1alpha1',
    kind: 'NodeDisk',
    metadata: { name: A1, resourceVersion: rv },
    spec: { desired: { state: 'Reserved', owner: 'team-db' } },
  });
  const json = JSON.parse((await nd('reserve', B2, '--dry-run=client', '-o', 'json')).stdout) as { metadata: { resourceVersion?: string; labels?: object } };
  t.is(json.metadata.resourceVersion, (await nodeDisksFor(controlPlane().admin()).get(B2)).metadata.resourceVersion);
  t.deepEqual(json.metadata.labels, { 'localtest.example.com/auto-reserve': 'true' });
  const release = JSON.parse((await nd('release', A2, '--owner', 'alice', '--dry-run=client', '-o', 'json')).stdout) as { jsonPatch: { op: string; path: string; value?: unknown }[] };
  t.deepEqual(release.jsonPatch[0], { op: 'test', path: '/metadata/resourceVersion', value: (await nodeDisksFor(controlPlane().admin()).get(A2)).metadata.resourceVersion });
});

test.serial('--dry-run=server -o yaml|json prints the server answer, as kubectl apply --server-side and kubectl patch print it', async (t) => {
  const cases: [string[], 'yaml' | 'json'][] = [
    [['reserve', A1, '--owner', 'team-db'], 'yaml'],
    [['reserve', B2], 'json'],
    [['release', A2, '--owner', 'alice'], 'yaml'],
  ];
  for (const [args, format] of cases) {
    const sent = JSON.parse((await nd(...args, '--dry-run=client', '-o', 'json')).stdout) as Record<string, unknown>;
    const ours = await nd(...args, '--dry-run=server', '-o', format);
    t.is(ours.code, 0, ours.stderr);
    const theirs = await kubectlDryRun(sent, format);
    t.is(theirs.code, 0, theirs.stderr);
    t.is(ours.stdout, theirs.stdout, `${args.join(' ')} -o ${format}`);
    t.regex(ours.stdout, /status/, 'the whole object as the server answered it, status included');
  }
  // Nothing was stored.
  const a1 = await nodeDisksFor(controlPlane().admin()).get(A1);
  t.is(a1.spec.desired?.owner, undefined);
});
