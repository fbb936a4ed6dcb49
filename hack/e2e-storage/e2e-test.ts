// The storage suites' programs: e2e.test, Kubernetes' e2e framework at the control plane's release with
// its external storage driver (e2e_storage_test.go), and agnhost, the framework's test image program of
// the same release; compiled once per machine from the wrapper module beside this file (go.mod pins the
// release; gen-go-mod.sh makes it) into the cache.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { kubernetesLdflags, pinnedVersions } from '../controlplane/binaries.ts';
import { ensureGoBuild, goPlatform, moduleSourceHash } from '../lib/gobuild.ts';
import { cacheRoot } from '../lib/paths.ts';

const moduleDir = fileURLToPath(new URL('.', import.meta.url));

export interface E2eBinaries {
  e2eTest: string;
  agnhost: string;
}

/** The paths of e2e.test and agnhost, built first if the cache lacks them. */
export async function ensureE2eBinaries(log?: (line: string) => void): Promise<E2eBinaries> {
  const { kubernetes } = await pinnedVersions();
  const { os, arch } = goPlatform();
  // Named by the module's own files too: a change to the test file or go.sum builds anew.
  const dir = join(cacheRoot(), 'e2e-storage', `e2e-${kubernetes}-${await moduleSourceHash(moduleDir)}-${os}-${arch}`);
  const ldflags = kubernetesLdflags(kubernetes);
  await ensureGoBuild({
    what: `Kubernetes ${kubernetes}'s e2e.test with the storage suites, and agnhost`,
    takes: 'about 5 minutes on 2 cores after the control plane',
    moduleDir,
    dir,
    targets: [
      { name: 'e2e.test', pkg: '.', test: true, ldflags },
      { name: 'agnhost', pkg: 'k8s.io/kubernetes/test/images/agnhost', ldflags },
    ],
    ...(log ? { log } : {}),
  });
  return { e2eTest: join(dir, 'e2e.test'), agnhost: join(dir, 'agnhost') };
}

if (import.meta.main) console.log(await ensureE2eBinaries());
