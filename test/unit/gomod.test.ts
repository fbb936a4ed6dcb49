// goModuleDir (hack/lib/gomod.ts): the directory of a published Go module, where the build reads the
// CSI spec's csi.proto; a module that cannot be had, or no Go at all, fails saying which and why.
// Real `go`: the module comes from the module cache, else from the Go module proxy (as every Go build here).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { pathWithoutGo } from '../../hack/lib/gobuild.ts';
import { goModuleDir } from '../../hack/lib/gomod.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

test.serial('the CSI spec module v1.13.0: its directory, with csi.proto in it', async (t) => {
  const dir = await goModuleDir('github.com/container-storage-interface/spec', 'v1.13.0');
  t.regex(dir, /\/github\.com\/container-storage-interface\/spec@v1\.13\.0$/);
  t.true(existsSync(`${dir}/csi.proto`));
});

test.serial("a module pinned by a folder's go.mod and go.sum: the version that go.mod requires (the CSI descriptors' kubelet)", async (t) => {
  const dir = await goModuleDir('k8s.io/kubelet', { pinnedBy: join(REPO_ROOT, 'hack/csiproto') });
  t.regex(dir, /\/k8s\.io\/kubelet@v0\.35\.4$/);
  t.true(existsSync(`${dir}/pkg/apis/pluginregistration/v1/api.proto`));
});

test.serial('a version that cannot be had names the module, the version and go’s reason', async (t) => {
  const saved = process.env.GOPROXY;
  process.env.GOPROXY = 'off';
  try {
    const err = await t.throwsAsync(goModuleDir('example.com/nodedisks/no-such-module', 'v0.0.1'));
    t.regex(err!.message, /^go mod download -json example\.com\/nodedisks\/no-such-module@v0\.0\.1 failed: .*GOPROXY=off/);
  } finally {
    if (saved === undefined) delete process.env.GOPROXY;
    else process.env.GOPROXY = saved;
  }
});

test.serial('without Go on PATH it says so', async (t) => {
  const saved = process.env.PATH;
  process.env.PATH = await pathWithoutGo();
  try {
    const err = await t.throwsAsync(goModuleDir('github.com/kubernetes-csi/csi-test/v5', 'v5.6.0'));
    t.regex(err!.message, /Go toolchain, which was not found: no `go` on PATH/);
  } finally {
    process.env.PATH = saved;
  }
});
