// Where a published Go module's files are on this machine: `go mod download -json <module>@<version>`
// fetches it once from the Go module proxy into the module cache and names its directory there. For
// files read from a module at build time (a .proto of the CSI spec or of the kubelet), and for a Go
// program built from its own module (one `go install` refuses for its replace directives).
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';

interface Download {
  Dir?: string;
  Error?: string;
}

/** One download per module version and process: the answers do not change while it runs. */
const known = new Map<string, Promise<string>>();

/**
 * The module's directory in the Go module cache (read-only there), downloaded first if needed: `version`
 * is either a version, or `{ pinnedBy: dir }`, a folder whose go.mod requires the module and whose go.sum
 * the download is checked against.
 */
export function goModuleDir(module: string, version: string | { pinnedBy: string }): Promise<string> {
  const key = typeof version === 'string' ? `${module}@${version}` : `${module} (pinned by ${version.pinnedBy})`;
  let dir = known.get(key);
  if (!dir) {
    dir = typeof version === 'string' ? download(`${module}@${version}`, tmpdir(), { GOWORK: 'off' }) : download(module, version.pinnedBy, { GOFLAGS: '-mod=readonly' });
    // A failure is not remembered: the next call tries again (the network may be back).
    dir.catch(() => known.delete(key));
    known.set(key, dir);
  }
  return dir;
}

/**
 * `go mod download -json key` in `cwd`: a version outside any module (a go.mod or go.work around the
 * caller's folder must not change the answer), or a module as the go.mod in `cwd` pins it.
 */
function download(key: string, cwd: string, extraEnv: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, ...extraEnv };
    execFile('go', ['mod', 'download', '-json', key], { cwd, env, maxBuffer: 16 * 1024 * 1024, timeout: 600_000 }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: string | number }) | null;
      if (e?.code === 'ENOENT') {
        reject(new Error(`the Go module ${key} is read through the Go toolchain, which was not found: no \`go\` on PATH. Install Go 1.26 or newer.`));
        return;
      }
      let answer: Download = {};
      try {
        answer = JSON.parse(stdout) as Download;
      } catch {
        // No JSON: go failed before it could say anything about the module; its stderr says why.
      }
      if (!e && answer.Dir) return resolve(answer.Dir);
      const why = answer.Error || stderr.trim() || e?.message || 'no Dir in its answer';
      reject(new Error(`go mod download -json ${key} failed: ${why}`));
    });
  });
}
