// The Dockerfile is generated from hack/lib/image-spec.ts, the one definition of what goes into each
// image (the local cluster builds from it too): the committed file must be what the generator writes.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { DOCKERFILE, renderDockerfile } from '../../hack/dockerfile.ts';
import { CSI_IMAGE, IMAGES, NODE_RUNTIME } from '../../hack/lib/image-spec.ts';

test('the committed Dockerfile is the one generated from image-spec.ts (run node hack/dockerfile.ts after editing it)', (t) => {
  t.is(readFileSync(DOCKERFILE, 'utf8'), renderDockerfile());
});

test('every image of the spec is a Dockerfile target with its user and entrypoint (the controller sizes its heap from the memory limit)', (t) => {
  const text = renderDockerfile();
  for (const img of IMAGES) {
    const stage = text.slice(text.indexOf(` AS ${img.target}\n`));
    t.regex(stage, new RegExp(`^USER ${img.user}$`, 'm'));
    const flags = img.nodeFlags.map((f) => `"${f}", `).join('');
    t.true(stage.includes(`\nENTRYPOINT ["/nodejs/bin/node", ${flags}"/app/${img.main}"]\n`), `${img.target}: ENTRYPOINT with ${flags || 'no flags'}`);
  }
});

test('the controller image starts node with half the memory limit as heap (docs/adr/0023)', (t) => {
  t.deepEqual(IMAGES.find((i) => i.target === 'operator')?.nodeFlags, ['--max-old-space-size-percentage=50']);
});

test('the agent image starts node optimizing for size, the one V8 flag NODE_OPTIONS refuses (docs/adr/0006)', (t) => {
  t.deepEqual(IMAGES.find((i) => i.target === 'agent')?.nodeFlags, ['--optimize-for-size']);
});

/** The text of one stage, from its FROM line to the blank line that ends it (or the end). */
function stageOf(text: string, name: string): string {
  const at = text.search(new RegExp(`^FROM \\S+ AS ${name}$`, 'm'));
  if (at < 0) return '';
  const end = text.indexOf('\n\n', at);
  return text.slice(at, end < 0 ? undefined : end + 1);
}

test('the agent and the CSI driver start from one node-runtime stage, Debian slim with the build stage’s Node 24 and nothing else; the controller stays distroless', (t) => {
  const text = renderDockerfile();
  t.is(stageOf(text, NODE_RUNTIME.stage), `FROM debian:bookworm-slim AS node-runtime\nCOPY --from=build /usr/local/bin/node /nodejs/bin/node\n`);
  t.regex(stageOf(text, 'agent'), /^FROM node-runtime AS agent$/m);
  t.regex(stageOf(text, CSI_IMAGE.target), /^FROM node-runtime AS node-disks-csi$/m);
  t.regex(stageOf(text, 'operator'), /^FROM gcr\.io\/distroless\/nodejs24-debian12:nonroot AS operator$/m);
  // A stage that copied Node again would put the binary in a layer of its own, no longer shared.
  t.is(text.match(/\/usr\/local\/bin\/node /g)?.length, 1);
});

test('the CSI driver target: the node runtime with the packages of its tools, dist/csi, root, node-disks-csi.mjs', (t) => {
  const text = renderDockerfile();
  t.regex(text, /^COPY csi \.\/csi$/m, 'the build stage has the driver’s sources');
  const stage = stageOf(text, CSI_IMAGE.target);
  t.not(stage, '', 'no node-disks-csi stage');
  t.regex(stage, /apt-get install -y --no-install-recommends mount util-linux e2fsprogs/);
  t.regex(stage, /^COPY --from=build \/src\/dist\/csi\/ \/app\/$/m);
  t.regex(stage, /^USER 0:0$/m);
  t.true(stage.endsWith('\nENTRYPOINT ["/nodejs/bin/node", "/app/node-disks-csi.mjs"]\n'));
});
