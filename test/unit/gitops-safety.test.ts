// `kubectl nodedisks gitops` never writes outside --dir: a kustomization.yaml or disk file in --dir that is
// a symbolic link (to a file elsewhere in the checkout, or outside it) is refused with the path and the
// fix, nothing is written, and the file the link points to is untouched; and an --owner the CRD refuses is
// refused before anything is written. Real files in a temp dir; --offline, so no cluster is involved.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { MAX_OWNER_LENGTH, OWNER_PATTERN } from '../../api/constants.ts';
import { nodeDiskName } from '../../api/names.ts';
import { nodeDiskSchema } from '../../api/v1alpha1/schema.ts';
import { run } from '../../plugin/cli.ts';
import { checkDirStaysInside } from '../../plugin/gitops/overlay.ts';
import type { Io } from '../../plugin/context.ts';

const NAME = nodeDiskName('node-s1', 'disk1');
const temp = mkdtempSync(join(tmpdir(), 'gitops-safety-'));
let dirs = 0;
test.after.always(() => rmSync(temp, { recursive: true, force: true }));

/** A fresh checkout: `repo/overlay` is --dir, `outside/` is not part of it. */
function checkout(): { repo: string; dir: string; outside: string } {
  const root = join(temp, `t${dirs++}`);
  const dir = join(root, 'repo', 'overlay');
  const outside = join(root, 'outside');
  mkdirSync(dir, { recursive: true });
  mkdirSync(outside);
  return { repo: join(root, 'repo'), dir, outside };
}

async function gitops(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: Io = { out: (s) => void (out += s), err: (s) => void (err += s), progress: () => {} };
  const code = await run(['gitops', ...args, '--offline'], io);
  return { code, out, err };
}

const KUSTOMIZATION = 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n';

test('a kustomization.yaml that links out of --dir is refused, naming the path and the fix; nothing is written', async (t) => {
  const { dir, outside } = checkout();
  const target = join(outside, 'kustomization.yaml');
  writeFileSync(target, KUSTOMIZATION);
  symlinkSync(target, join(dir, 'kustomization.yaml'));
  const r = await gitops('reserve', NAME, '--dir', dir);
  t.not(r.code, 0);
  t.is(
    r.err,
    `error: ${join(dir, 'kustomization.yaml')} is a symbolic link (to ${target}); gitops writes only regular files inside --dir and never follows a link out of it: replace the link with a copy of the file, or point --dir at the directory that holds the file; nothing was written\n`,
  );
  t.is(readFileSync(target, 'utf8'), KUSTOMIZATION, 'the file the link points to is untouched');
  t.deepEqual(readdirSync(dir), ['kustomization.yaml'], 'no disk file written either');
  t.true(lstatSync(join(dir, 'kustomization.yaml')).isSymbolicLink());
});

test('a disk file that is a link is refused too, even a relative link to a file elsewhere in the checkout', async (t) => {
  const { repo, dir } = checkout();
  const target = join(repo, 'README.md');
  writeFileSync(target, '# not a NodeDisk\n');
  symlinkSync('../README.md', join(dir, `${NAME}.yaml`));
  const r = await gitops('reserve', NAME, '--dir', dir, '--owner', 'team-db');
  t.not(r.code, 0);
  t.regex(r.err, new RegExp(`^error: ${join(dir, `${NAME}.yaml`).replaceAll('.', '\\.')} is a symbolic link \\(to \\.\\./README\\.md\\); .*nothing was written\\n$`));
  t.is(readFileSync(target, 'utf8'), '# not a NodeDisk\n');
  t.false(existsSync(join(dir, 'kustomization.yaml')), 'the kustomization is not written when a disk file is refused');
});

test('a FIFO or directory where a file goes is refused (reading a FIFO would block)', async (t) => {
  const { dir } = checkout();
  mkdirSync(join(dir, 'kustomization.yaml'));
  const r = await gitops('reserve', NAME, '--dir', dir);
  t.not(r.code, 0);
  t.regex(r.err, /kustomization\.yaml is not a regular file; move it away or choose another --dir; nothing was written/);
  t.false(existsSync(join(dir, `${NAME}.yaml`)));
});

test('regular files are still written and edited in place, and --dir itself may be a link', async (t) => {
  const { dir, outside } = checkout();
  writeFileSync(join(dir, 'kustomization.yaml'), KUSTOMIZATION);
  const linked = join(outside, 'overlay-link');
  symlinkSync(dir, linked);
  const r = await gitops('reserve', NAME, '--dir', linked);
  t.is(r.code, 0, r.err);
  t.regex(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'), new RegExp(`resources: \\[${NAME}\\.yaml\\]`));
  t.true(lstatSync(join(dir, `${NAME}.yaml`)).isFile());
});

test('--owner the CRD refuses is refused as reserve refuses it, before anything is written', async (t) => {
  for (const owner of ['team db', '-team', 'team-', 'a'.repeat(MAX_OWNER_LENGTH + 1), 'ünïcode', 'auto']) {
    const { dir } = checkout();
    const r = await gitops('reserve', NAME, '--dir', dir, `--owner=${owner}`);
    t.is(r.code, 2, owner);
    t.regex(
      r.err,
      owner === 'auto'
        ? /--owner auto is reserved for the label policy/
        : /is not a valid owner: letters, digits and - _ \. : @ \/, starting and ending with a letter or digit, at most 253 characters/,
      owner,
    );
    t.deepEqual(readdirSync(dir), [], `nothing written for ${owner}`);
  }
  const { dir } = checkout();
  const ok = await gitops('reserve', NAME, '--dir', dir, '--owner', 'team-db@example.com/x:1');
  t.is(ok.code, 0, ok.err);
});

test('reserve, gitops and the CRD check the owner against one pattern', (t) => {
  const owner = nodeDiskSchema.properties!.spec!.properties!.desired!.properties!.owner!;
  t.is(owner.pattern, `^$|${OWNER_PATTERN}`);
  t.is(owner.maxLength, MAX_OWNER_LENGTH);
});

test('a --dir the checkout leads out of through a link is refused; links that stay inside, and a --dir outside the checkout, are not', (t) => {
  const { repo, outside } = checkout();
  mkdirSync(join(repo, 'clusters'));
  symlinkSync(outside, join(repo, 'clusters', 'prod'));
  for (const dir of ['clusters/prod', 'clusters/prod/nodedisks', join(repo, 'clusters', 'prod', 'new', 'deeper')]) {
    t.throws(
      () => checkDirStaysInside(dir, repo),
      {
        message: `--dir ${dir}: ${join(repo, 'clusters', 'prod')} is a symbolic link to ${outside}, out of the current directory; gitops never follows a link out of the checkout it runs in: pass the real directory as --dir if that is where the overlay belongs; nothing was written`,
      },
      dir,
    );
  }
  symlinkSync('../../nowhere', join(repo, 'clusters', 'dangling-out'));
  t.throws(() => checkDirStaysInside('clusters/dangling-out/x', repo), { message: /is a symbolic link to \.\.\/\.\.\/nowhere, out of the current directory/ }, 'a dangling link out of it too');
  mkdirSync(join(repo, 'overlays', 'prod'), { recursive: true });
  symlinkSync('prod', join(repo, 'overlays', 'current'));
  t.notThrows(() => checkDirStaysInside('overlays/current', repo), 'a link inside the checkout');
  t.notThrows(() => checkDirStaysInside('overlays/new/dir', repo), 'directories still to make');
  t.notThrows(() => checkDirStaysInside(join(outside, 'x'), repo), 'outside the checkout: the path the user named');
  t.notThrows(() => checkDirStaysInside(join(repo, 'overlays', 'prod'), repo), 'an absolute path inside the checkout, without links');
});
