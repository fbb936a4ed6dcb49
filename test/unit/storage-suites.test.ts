// The storage suites' run (hack/e2e-storage): its summary of ginkgo's JSON report counts only our driver's
// specs, names each failure, and gives every skip a reason; every spec we skip by name is explained in
// docs/contributing.md; and e2e.test is built from the same Kubernetes release as the control plane.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { goModuleDir } from '../../hack/lib/gomod.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { buildE2eImages, E2E_REGISTRY, REPO_LIST } from '../../hack/e2e-storage/images.ts';
import { formatSummary, summarize } from '../../hack/e2e-storage/report.ts';
import { storageFocus } from '../../hack/e2e-storage/run.ts';
import { DRIVER, FOCUS, SKIP, SKIPS } from '../../hack/e2e-storage/selection.ts';

const spec = (leaf: string, state: string, message?: string) => ({
  ContainerHierarchyTexts: ['External Storage', `[Driver: ${DRIVER}]`, '[Testpattern: Dynamic PV (default fs)] volumes'],
  LeafNodeText: leaf,
  LeafNodeType: 'It',
  State: state,
  RunTime: 2e9,
  ...(message === undefined ? {} : { Failure: { Message: message } }),
});

test("the summary counts our driver's specs by outcome, with each failure's first line and each skip's reason", (t) => {
  const s = summarize([
    {
      SpecReports: [
        { ...spec('[SynchronizedBeforeSuite]', 'passed'), LeafNodeType: 'SynchronizedBeforeSuite' },
        spec('should store data', 'passed'),
        spec('should allow exec of files on the volume', 'failed', 'Timed out after 300s.\nExpected pod to be Running'),
        spec('should not mount / map unused volumes in a pod [LinuxOnly]', 'skipped'),
        spec('should provision a volume from a snapshot', 'skipped', 'Driver nodedisks.localtest.example.com does not support snapshots -- skipping'),
        spec('should clone a volume', 'skipped', 'Driver nodedisks.localtest.example.com does not support snapshots -- skipping\n  at x.go:1'),
        { ...spec('should work', 'passed'), ContainerHierarchyTexts: ['External Storage', '[Driver: other.example.com]'] },
      ],
    },
  ]);
  t.is(s.passed, 1);
  t.is(s.failed, 1);
  t.is(s.skipped, 3);
  t.deepEqual(s.failures, [
    { spec: `External Storage [Driver: ${DRIVER}] [Testpattern: Dynamic PV (default fs)] volumes should allow exec of files on the volume`, message: 'failed: Timed out after 300s.' },
  ]);
  t.deepEqual(s.skipReasons, {
    [`skipped here: ${SKIPS[1]!.reason}`]: 1,
    'Driver nodedisks.localtest.example.com does not support snapshots -- skipping': 2,
  });
  t.is(s.specSeconds, 10);
  t.regex(formatSummary(s), /^1 passed, 1 failed, 3 skipped/);
});

test('the focus selects our driver only, and the skip regex is every pattern of the list', (t) => {
  const name = (driver: string) => `External Storage [Driver: ${driver}] [Testpattern: Dynamic PV (block volmode)] volumeMode should fail to use a volume in a pod with mismatched mode [Slow]`;
  t.true(new RegExp(FOCUS).test(name(DRIVER)));
  t.false(new RegExp(FOCUS).test(name('nodedisksXlocaltest.example.com')));
  const skip = new RegExp(SKIP);
  t.true(skip.test(`${name(DRIVER)} should unmount if pod is force deleted while kubelet is down [Disruptive]`));
  t.false(skip.test(name(DRIVER)));
});

test('docs/contributing.md gives every spec skipped by name, with its reason', (t) => {
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'contributing.md'), 'utf8').replace(/\s+/g, ' ');
  for (const s of SKIPS) {
    t.true(doc.includes(`\`${s.pattern}\``), `contributing.md lacks the pattern \`${s.pattern}\``);
    t.true(doc.includes(s.reason), `contributing.md lacks the reason for ${s.pattern}: ${s.reason}`);
  }
});

test("e2e.test's module requires the control plane's Kubernetes release, with the same replacements", (t) => {
  const cp = readFileSync(join(REPO_ROOT, 'hack', 'controlplane', 'go.mod'), 'utf8');
  const e2e = readFileSync(join(REPO_ROOT, 'hack', 'e2e-storage', 'go.mod'), 'utf8');
  const kube = (m: string) => /^\s*(?:require )?k8s\.io\/kubernetes (v\S+)$/m.exec(m)?.[1];
  const replaces = (m: string) => /^replace \([\s\S]*?^\)/m.exec(m)?.[0];
  t.truthy(kube(cp));
  t.is(kube(e2e), kube(cp), 'run hack/e2e-storage/gen-go-mod.sh');
  t.truthy(replaces(cp));
  t.is(replaces(e2e), replaces(cp), 'run hack/e2e-storage/gen-go-mod.sh');
});

test('the suites’ images: a list of image names without busybox is refused, naming it and the override', async (t) => {
  const err = await t.throwsAsync(buildE2eImages(['registry.k8s.io/e2e-test-images/busybox:1.37.0-1'], '/nonexistent/agnhost'));
  t.regex(err!.message, /^e2e\.test --list-images names no localhost\/e2e-test-images\/busybox: is KUBE_TEST_REPO_LIST applied\? \(it listed 1 images\)$/);
});

test("KUBE_TEST_REPO_LIST moves every registry of the framework's RegistryList (the pinned release's manifest.go) under localhost/", async (t) => {
  const k8s = await goModuleDir('k8s.io/kubernetes', { pinnedBy: join(REPO_ROOT, 'hack', 'e2e-storage') });
  const manifest = readFileSync(join(k8s, 'test', 'utils', 'image', 'manifest.go'), 'utf8');
  const struct = /^type RegistryList struct \{([\s\S]*?)^\}/m.exec(manifest)?.[1] ?? '';
  const keys = [...struct.matchAll(/yaml:"(\w+)"/g)].map((m) => m[1]);
  t.true(keys.length > 5, 'RegistryList not found in manifest.go');
  t.deepEqual(Object.keys(REPO_LIST).sort(), keys.sort());
  for (const [key, registry] of Object.entries(REPO_LIST)) t.regex(registry, /^localhost\//, key);
  t.is(REPO_LIST.promoterE2eRegistry, E2E_REGISTRY);
});

test('a failure outside any spec (the suite set-up or tear-down) is a failure of the run', (t) => {
  const s = summarize([
    {
      SpecReports: [
        { ...spec('', 'failed', 'there are no nodes that are Ready'), ContainerHierarchyTexts: null, LeafNodeType: 'SynchronizedBeforeSuite' },
        spec('should store data', 'skipped'),
        { ...spec('', 'passed'), ContainerHierarchyTexts: null, LeafNodeType: 'SynchronizedAfterSuite' },
      ],
    },
  ]);
  t.is(s.failed, 1);
  t.deepEqual(s.failures, [{ spec: '[SynchronizedBeforeSuite]', message: 'failed: there are no nodes that are Ready' }]);
});

test('a --focus the summary cannot read as a regular expression is refused, naming it; a readable one narrows the driver’s focus', (t) => {
  t.throws(() => storageFocus('(?i)volumes'), { message: /^--focus "\(\?i\)volumes" is not a regular expression this runner reads .*: Invalid regular expression/ });
  t.is(storageFocus('volumes'), `${FOCUS}.*(volumes)`);
  t.is(storageFocus(), FOCUS);
});
