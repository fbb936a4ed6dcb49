// kubectl's --dry-run as every plugin command that has it reads it: bare, it is --dry-run=client (with
// kubectl's deprecation warning) and never takes the next word for its value; a value that is not none,
// client or server is a usage error naming those. No cluster: the API server here is unreachable (exit 7),
// so each case that ends otherwise ended before any request.
import test from 'ava';
import { run } from '../../plugin/cli.ts';
import type { Io } from '../../plugin/context.ts';

const UNREACHABLE = ['--server', 'https://127.0.0.1:1', '--token', 'tok'];

async function plugin(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: Io = { out: (s) => void (out += s), err: (s) => void (err += s), progress: () => {} };
  const code = await run(args, io);
  return { code, out, err };
}

const BARE_WARNING = 'Warning: --dry-run is deprecated and can be replaced with --dry-run=client.\n';

test("a bare --dry-run is --dry-run=client, with kubectl's warning: claim prints the claim and sends nothing", async (t) => {
  const r = await plugin('claim', 'db', '-n', 'team', '--dry-run', ...UNREACHABLE);
  t.is(r.code, 0, r.err);
  t.is(r.out, 'nodediskclaim.localtest.example.com/db created (dry run)\n');
  t.is(r.err, BARE_WARNING);
  const explicit = await plugin('claim', 'db', '-n', 'team', '--dry-run=client', ...UNREACHABLE);
  t.is(explicit.out, r.out);
  t.is(explicit.err, '', 'no warning for --dry-run=client');
});

test('a bare --dry-run never takes the next word for its value, as in kubectl', async (t) => {
  const named = await plugin('claim', '--dry-run', 'db', '-n', 'team', ...UNREACHABLE);
  t.is(named.code, 0, named.err);
  t.is(named.out, 'nodediskclaim.localtest.example.com/db created (dry run)\n', 'db is the claim name');
  const stray = await plugin('prune', '--dry-run', 'client', ...UNREACHABLE);
  t.is(stray.code, 2);
  t.regex(stray.err, /^error: unexpected argument "client"/);
  const wait = await plugin('claim', 'db', '-n', 'team', '--dry-run', '--wait', ...UNREACHABLE);
  t.is(wait.code, 2);
  t.regex(wait.err, /--wait cannot be used with --dry-run/);
});

test("--dry-run=true and --dry-run=false are client and none, with kubectl's warning for a boolean value", async (t) => {
  const yes = await plugin('claim', 'db', '-n', 'team', '--dry-run=true', ...UNREACHABLE);
  t.is(yes.code, 0, yes.err);
  t.is(yes.out, 'nodediskclaim.localtest.example.com/db created (dry run)\n');
  t.is(yes.err, 'Warning: --dry-run=true is deprecated (boolean value) and can be replaced with --dry-run=client.\n');
  const no = await plugin('claim', 'db', '-n', 'team', '--dry-run=false', ...UNREACHABLE);
  t.is(no.code, 7, 'none: the claim is sent (to an API server that is not there)');
  t.true(no.err.startsWith('Warning: --dry-run=false is deprecated (boolean value) and can be replaced with --dry-run=none.\n'), no.err);
});

test('a --dry-run value other than none, client or server is a usage error naming them, for every command that takes --dry-run', async (t) => {
  const commands = [['prune'], ['cordon', 'x'], ['uncordon', 'x'], ['reserve', 'x'], ['release', 'x'], ['claim', 'x', '-n', 'team']];
  for (const cmd of commands) {
    for (const value of ['maybe', '']) {
      const r = await plugin(...cmd, `--dry-run=${value}`, ...UNREACHABLE);
      const what = `${cmd[0]} --dry-run=${value}`;
      t.is(r.code, 2, `${what}: ${r.err}`);
      t.regex(r.err, new RegExp(`^error: --dry-run must be .*, got ${JSON.stringify(JSON.stringify(value)).slice(1, -1)}\\n$`), what);
      for (const valid of ['none', 'client', 'server']) t.true(r.err.includes(valid), `${what} names ${valid}`);
    }
  }
});

test('completion: the word after a bare --dry-run is not offered dry-run values; --dry-run=<TAB> is', async (t) => {
  t.is((await plugin('__complete', 'prune', '--dry-run', '')).out, ':4\n');
  t.is((await plugin('__complete', 'prune', '--dry-run=')).out, '--dry-run=none\n--dry-run=client\n--dry-run=server\n:4\n');
});
