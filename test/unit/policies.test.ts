// The admission policies of kustomize/policies match what the rest of the install configures (ADR 28):
// the identities by their ServiceAccounts' names in any namespace, and the agent's disk dir as the
// DaemonSet mounts it. The API server's behaviour is shown in test/integration/policies*.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { loadAll } from 'js-yaml';
import { DEFAULT_DISK_DIR } from '../../api/constants.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

interface Policy {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: { matchConditions?: { name: string; expression: string }[]; variables?: { name: string; expression: string }[] };
}
interface DaemonSet {
  kind: string;
  spec: {
    template: {
      spec: {
        containers: { name: string; args: string[]; volumeMounts: { name: string; mountPath: string }[] }[];
        volumes: { name: string; hostPath?: { path: string } }[];
      };
    };
  };
}
const docs = <T>(path: string) => loadAll(readFileSync(join(REPO_ROOT, path), 'utf8')) as T[];
const policyFiles = readdirSync(join(REPO_ROOT, 'kustomize/policies')).filter((f) => f.endsWith('_policy.yaml'));
const policies = policyFiles.flatMap((f) => docs<Policy>(`kustomize/policies/${f}`)).filter((o) => o.kind === 'ValidatingAdmissionPolicy');
const serviceAccounts = docs<{ metadata: { name: string; namespace: string } }>('kustomize/rbac/service_accounts.yaml');

test('every policy matches its ServiceAccount by name in whatever namespace the install lives in, whatever prefix or suffix kustomize gave it', (t) => {
  t.is(policies.length, 6);
  // The wipe policy holds every identity alike (ADR 38): it names none.
  t.deepEqual(
    policies.filter((p) => !p.spec.matchConditions).map((p) => p.metadata.name),
    ['nodedisks-wipe.localtest.example.com'],
  );
  for (const p of policies.filter((p) => p.spec.matchConditions)) {
    const exprs = (p.spec.matchConditions ?? []).map((c) => c.expression);
    t.is(exprs.length, 1, p.metadata.name);
    const m = /^!?request\.userInfo\.username\.matches\('\^system:serviceaccount:\[\^:\]\+:\(\[\^:\]\*-\)\?([a-z-]+)\(-\[\^:\]\*\)\?\$'\)$/.exec(exprs[0]!);
    t.truthy(m, `${p.metadata.name}: ${exprs[0]}`);
    t.true(
      serviceAccounts.some((sa) => sa.metadata.name === m![1]),
      `${p.metadata.name} names ServiceAccount ${m![1]}`,
    );
  }
  // No namespace is spelled in a policy: kustomize's `namespace:` would not rewrite it.
  for (const f of policyFiles) t.notRegex(readFileSync(join(REPO_ROOT, 'kustomize/policies', f), 'utf8'), /node-disks-system/, f);
});

test("the agent policy's disk dir is the one the DaemonSet mounts and the agent writes into spec.path", (t) => {
  const agent = policies.find((p) => p.metadata.name === 'nodedisks-agent.localtest.example.com')!;
  const diskDir = agent.spec.variables?.find((v) => v.name === 'diskDir')?.expression;
  t.is(diskDir, `'${DEFAULT_DISK_DIR}'`);
  const ds = docs<DaemonSet>('kustomize/agent/daemonset.yaml').find((o) => o.kind === 'DaemonSet')!;
  const pod = ds.spec.template.spec;
  const container = pod.containers.find((c) => c.name === 'agent')!;
  t.true(container.args.includes(`--disk-dir=${DEFAULT_DISK_DIR}`));
  t.false(
    container.args.some((a) => a.startsWith('--host-disk-dir')),
    'spec.path is the --disk-dir: the host dir is mounted at the same path',
  );
  t.is(container.volumeMounts.find((v) => v.name === 'disks')?.mountPath, DEFAULT_DISK_DIR);
  t.is(pod.volumes.find((v) => v.name === 'disks')?.hostPath?.path, DEFAULT_DISK_DIR);
  // No overlay of this repository moves the disk dir (it would have to set the policy's diskDir too).
  for (const overlay of readdirSync(join(REPO_ROOT, 'kustomize/overlays'))) {
    t.notRegex(readFileSync(join(REPO_ROOT, 'kustomize/overlays', overlay, 'kustomization.yaml'), 'utf8'), /disk-dir|hostPath|mountPath/, overlay);
  }
});
