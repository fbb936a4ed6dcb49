// Which of Kubernetes' external storage specs `npm run test:storage` runs for NodeDisks. Every spec of the
// driver is focused; the few that cannot run on the local cluster are skipped here by name, each with its
// reason (docs/contributing.md lists them, and a unit test keeps the two in step). Specs needing a
// capability the test-driver YAML says we lack are skipped by the suites themselves, with their own
// message, which the run's summary groups and counts.

export const DRIVER = 'nodedisks.localtest.example.com';

/** Every spec of our driver. */
export const FOCUS = `External.Storage \\[Driver: ${DRIVER.replaceAll('.', '\\.')}\\]`;

export interface Skip {
  /** An RE2 pattern matched against the spec's full text. */
  pattern: string;
  reason: string;
}

export const SKIPS: Skip[] = [
  {
    pattern: '\\[Disruptive\\]',
    reason:
      "They stop and start the kubelet over SSH with systemctl; the local cluster's nodes have neither SSH nor systemd. test/e2e/_csi-suite.ts checks what they check with npm run cluster:node: a volume written before a kubelet restart is read after it, and pods deleted (gracefully and forced) while their kubelet is down are unmounted and unstaged when it returns; and a node reboot besides.",
  },
  {
    pattern: 'should not mount / map unused volumes',
    reason:
      "Its check runs in PID 1's mount namespace through a host-exec pod, and the local cluster's nodes share the host's PID namespace: it would look at the host, never find the pod's dir, and pass whatever the driver did.",
  },
  {
    pattern: 'any volume data source',
    reason:
      "It needs sig-storage's hello-populator and volume-data-source-validator images, which cannot be built here, and a populator that reaches the API through a Service IP, which the local cluster (no kube-proxy) does not route.",
  },
];

/** The --ginkgo.skip regex: any of the patterns. */
export const SKIP = SKIPS.map((s) => s.pattern).join('|');

/**
 * The subset CI runs (test/e2e/storage-suites.test.ts), one spec or two of each path through the driver:
 * a filesystem and a block volume written and read back, exec from a volume, a mode mismatch refused,
 * two volumes of one node kept across a pod's re-creation and one volume shared by pods of one node
 * (filesystem and block), an ext3 volume, the class's mount options on the mount, capacity published,
 * and delayed binding to an allowed topology or none.
 */
export const CI_FOCUS = [
  '\\[Testpattern: Dynamic PV \\((default fs|block volmode)\\)\\] (volumes|volumeMode|capacity) ',
  '\\[Testpattern: Dynamic PV \\(delayed binding\\)\\] topology ',
  // xfs's patterns are marked [Slow] before the suite's name.
  '\\[Testpattern: Dynamic PV \\((ext3|xfs)\\)\\] (\\[Slow\\] )?volumes should store data',
  '\\[Testpattern: Dynamic PV \\(default fs\\)\\] provisioning should provision storage with mount options',
  '\\[Testpattern: Dynamic PV \\((filesystem|block) volmode\\)\\] multiVolume .*(same volume mode and retain data across pod recreation on the same node|concurrently access the single volume from pods on the same node)',
].join('|');
/** How many specs CI_FOCUS runs, all of which must pass: fewer means the focus no longer selects them. */
export const CI_MIN_PASSED = 14;
