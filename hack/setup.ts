// `npm run setup [-- NAME…]`: optional. Builds now, instead of on first use, what the commands build
// from Go modules: the control plane (npm start, npm test), the health-check runner, helm, krew and
// Prometheus' text parser and PromQL parser (npm test), csi-sanity (the CSI driver's conformance tests)
// and csi-provisioner (the local cluster's CSI sidecar), e2e.test and agnhost (npm run test:storage);
// and fetches promtool and prometheus (Debian's prometheus package, npm test), busybox (Debian's
// busybox-static, npm run test:storage), mkfs.xfs (Debian's xfsprogs, the local cluster's CSI image) and
// fio (Debian's, with the libraries it links that the host lacks: npm run bench:io).
//   node hack/setup.ts                    all twelve
//   node hack/setup.ts krew healthcheck   only those
import { ensureBinaries } from './controlplane/binaries.ts';
import { ensureCsiProvisioner, ensureCsiSanity, ensureToolRunner } from './csi/tools.ts';
import { ensureE2eBinaries } from './e2e-storage/e2e-test.ts';
import { ensureBusybox } from './e2e-storage/images.ts';
import { ensureHealthcheck } from './healthcheck/healthcheck.ts';
import { ensureHelm } from './helm/helm.ts';
import { ensureKrew, ensureValidateKrewManifest } from './krew/krew.ts';
import { ensurePromql } from './promql/promql.ts';
import { ensurePromtext } from './promtext/promtext.ts';
import { ensurePromtool } from './promtool/promtool.ts';
import { ensureXfsprogs } from './cluster/xfsprogs.ts';
import { ensureFaultyDisk } from './faultydisk/faultydisk.ts';
import { ensureFio } from './fio/fio.ts';

const tools: Record<string, () => Promise<string>> = {
  controlplane: async () => {
    const b = await ensureBinaries();
    return `Kubernetes ${b.kubernetesVersion}, etcd ${b.etcdVersion} (${b.source}: ${b.dir})`;
  },
  'csi-provisioner': () => ensureCsiProvisioner(),
  'csi-sanity': () => ensureCsiSanity(),
  'e2e-storage': async () => {
    const b = await ensureE2eBinaries();
    return `${b.e2eTest}, ${b.agnhost} and ${await ensureBusybox()}`;
  },
  faultydisk: () => ensureFaultyDisk(),
  fio: async () => (await ensureFio()).bin,
  healthcheck: () => ensureHealthcheck(),
  helm: () => ensureHelm(),
  krew: async () => `${await ensureKrew()} and ${await ensureValidateKrewManifest()}`,
  promql: () => ensurePromql(),
  promtext: () => ensurePromtext(),
  promtool: () => ensurePromtool(),
  toolrunner: () => ensureToolRunner(),
  xfsprogs: async () => (await ensureXfsprogs()).map((f) => f.cached).join(', '),
};

const wanted = process.argv.slice(2);
const unknown = wanted.filter((n) => !(n in tools));
if (unknown.length > 0) {
  console.error(`error: unknown ${unknown.join(', ')}; choose from ${Object.keys(tools).join(', ')} (none: all)`);
  process.exit(2);
}
let failed = false;
for (const name of wanted.length > 0 ? wanted : Object.keys(tools)) {
  const started = Date.now();
  try {
    const what = await tools[name]!();
    console.error(`${name}: ${what} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } catch (err) {
    console.error(`error: ${name}: ${(err as Error).message}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
