// Stand-in drives for the local cluster: loop devices over files in a node's own dir (outside its disk
// dir), each named in that node's by-id dir as udev names a drive. The nodes share one kernel and /dev, so
// the by-id dir is what makes a drive one node's: the local cluster's agents select `wwn-0x5000d15c*` there
// (kustomize/overlays/local-cluster, ci/local-cluster-values.yaml). The cluster's teardown detaches loop
// devices over files in the node dirs; detachStandInDrives is a test's own tidying before that.
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NODE_NAMES, nodeSpec } from './topology.ts';

export interface StandInDrive {
  node: string;
  /** The loop device, /dev/loopN. */
  device: string;
  /** Its by-id link on the host (the node sees it at /var/lib/node-disks-manager/by-id/<name>). */
  link: string;
  /** The by-id name: wwn-0x<wwn>. */
  byIdName: string;
  /** The NodeDisk the node's agent reports it as. */
  nodeDisk: string;
  bytes: number;
}

/**
 * The WWN of a node's drive: `series` keeps the drives of one test apart from another's, `node` is the
 * node's index, `n` the drive's number on it. Hex digits only, as a WWN has.
 */
export function standInWwn(series: number, node: number, n: number): string {
  return `5000d15c${series.toString(16).padStart(2, '0')}${node.toString(16)}${n.toString(16)}`;
}

/**
 * Attaches one drive of each size to every node (sparse files: they cost nothing until written).
 * `directIo`: the loop device reads and writes its file with direct I/O, so no page cache of the host sits
 * under the drive, as none sits under a real one (what an IO benchmark needs). `backingDir`: where the
 * files go instead of the node's dir (a benchmark puts them in memory, so that the host disk's own
 * allocation of a file's blocks on first write does not weigh on whichever run writes first).
 */
export function attachStandInDrives(dataDir: string, sizes: readonly number[], series = 0, o: { directIo?: boolean; backingDir?: string } = {}): StandInDrive[] {
  const drives: StandInDrive[] = [];
  try {
    for (const [i, node] of NODE_NAMES.entries()) {
      const dir = join(nodeSpec(dataDir, node, i).dir, 'node-disks-manager');
      mkdirSync(join(dir, 'drives'), { recursive: true });
      mkdirSync(join(dir, 'by-id'), { recursive: true });
      for (const [j, bytes] of sizes.entries()) {
        const wwn = standInWwn(series, i, j + 1);
        const file = join(o.backingDir ?? join(dir, 'drives'), `drive-${wwn}`);
        writeFileSync(file, '');
        truncateSync(file, bytes);
        const device = execFileSync('losetup', ['--find', '--show', ...(o.directIo ? ['--direct-io=on'] : []), file], { encoding: 'utf8' }).trim();
        const byIdName = `wwn-0x${wwn}`;
        const link = join(dir, 'by-id', byIdName);
        drives.push({ node, device, link, byIdName, nodeDisk: `node-disk-${node}-drive-wwn-${wwn}`, bytes });
        // Relative, as udev writes them: the agent and csi-node read the kernel name from the link's last part.
        symlinkSync(`../../${device.replace('/dev/', '')}`, link);
      }
    }
  } catch (err) {
    detachStandInDrives(drives);
    throw err;
  }
  return drives;
}

export function detachStandInDrives(drives: readonly StandInDrive[]): void {
  for (const d of drives) {
    try {
      execFileSync('losetup', ['-d', d.device], { stdio: 'ignore' });
    } catch {
      // Detached already, by the cluster's teardown.
    }
  }
}
