// Two processes building the same Go tool on a cold cache at once (the integration files run two at a
// time): the first to finish puts its build in place and returns, and the second must not pull that
// cache entry from under the first's callers. A stand-in `go` on PATH makes the builds quick and ordered.
import { chmod, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { ensureGoBuild, type GoBuild } from '../../hack/lib/gobuild.ts';

test('a second build finishing after the first leaves the first one in place: the cache entry is never removed while in use', async (t) => {
  const work = await mkdtemp(join(tmpdir(), 'nodedisks-gobuild-'));
  const savedPath = process.env.PATH;
  try {
    // `go build … -o OUT PKG`: sleeps as long as $WORK/delay-<n> says for the n-th call, then writes OUT.
    const fake = join(work, 'bin');
    await writeFile(join(work, 'count'), '');
    await mkdir(fake);
    await writeFile(
      join(fake, 'go'),
      `#!/bin/sh\nn=$(wc -c < "${work}/count"); printf x >> "${work}/count"\nwhile [ "$1" != "-o" ]; do shift; done\nif [ "$n" -eq 0 ]; then sleep 0.2; else sleep 0.8; fi\nprintf '#!/bin/sh\\n' > "$2"; chmod +x "$2"\n`,
    );
    await chmod(join(fake, 'go'), 0o755);
    process.env.PATH = `${fake}:${savedPath}`;
    const b: GoBuild = { what: 'a tool', moduleDir: work, dir: join(work, 'cache', 'tool'), targets: [{ name: 'tool', pkg: '.' }], log: () => {} };
    const first = ensureGoBuild(b);
    await new Promise((r) => setTimeout(r, 50));
    const second = ensureGoBuild(b);
    t.is(await first, 'built');
    const entry = (await stat(join(b.dir, 'tool'))).ino;
    // Watch the entry while the second build runs to its end.
    let missing = 0;
    let done = false;
    const finished = second.finally(() => {
      done = true;
    });
    while (!done) {
      await stat(join(b.dir, 'tool')).catch(() => missing++);
      await new Promise((r) => setImmediate(r));
    }
    t.is(await finished, 'built');
    t.is(missing, 0, 'the cache entry was missing while the second build replaced it');
    t.is((await stat(join(b.dir, 'tool'))).ino, entry, 'the first build, already in use, was replaced by the second');
  } finally {
    process.env.PATH = savedPath;
    await rm(work, { recursive: true, force: true });
  }
});
