// How long the node side's wipe of a drive takes per GiB (csi/drive-wiper.ts, docs/drives.md): the wiper as
// csi-node runs it, in its default 1 GiB steps with its progress file, on a stand-in drive, a loop device
// with direct I/O over a sparse file on this machine's disk, each first written with WRITTEN MiB of data
// (spread over it) and synced; RUNS wipes of each size in SIZES. A loop device does BLKZEROOUT with a
// zero-range fallocate on its file (the blocks stay, marked unwritten), so this is the wiper's own cost per
// step, not a real drive's zeroing speed (an NVMe drive that deallocates with zeroes is alike; an HDD
// writes every byte). Root (loop devices). `sudo npm run bench:drive-wipe` (SIZES=1Gi,16Gi, WRITTEN=64, RUNS=3).
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, open, readFile, rm, stat, symlink, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { formatWipeRequest, parseWipeAnswer, wipeAnswerName, wipeRequestName } from '../api/drive-wipe.ts';
import { DriveWiper } from '../csi/drive-wiper.ts';
import { createLogger } from '../lib/runtime/log.ts';
import { quantile } from './lib/samples.ts';
import { parseSizes, sizeLabel } from './lib/sizes.ts';
import { startRecord } from './lib/results.ts';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const SIZES = parseSizes('SIZES', process.env.SIZES ?? '1Gi,16Gi');
const WRITTEN_MIB = Number(process.env.WRITTEN ?? 64);
const RUNS = Number(process.env.RUNS ?? 3);

if (process.getuid?.() !== 0) throw new Error('bench:drive-wipe attaches loop devices: run it as root (sudo npm run bench:drive-wipe)');

async function dirty(device: string, size: number, written: number): Promise<void> {
  const pieces = Math.max(1, Math.round(written / MiB));
  const step = Math.floor(size / pieces / 4096) * 4096;
  const chunk = Buffer.alloc(MiB, 0xa5);
  const fh = await open(device, 'r+');
  for (let i = 0; i < pieces; i++) await fh.write(chunk, 0, MiB, i * step);
  await fh.sync();
  await fh.close();
}

const record = startRecord('drive-wipe', { sizes: SIZES.map(sizeLabel).join(','), writtenMiB: WRITTEN_MIB, runs: RUNS });
const dir = await mkdtemp(join(tmpdir(), 'nodedisks-bench-drive-wipe-'));
const loops: string[] = [];
const figures: Record<string, number> = {};
try {
  const diskDir = join(dir, 'disks');
  const byIdDir = join(dir, 'by-id');
  await mkdir(diskDir);
  await mkdir(byIdDir);
  console.log(`dir ${dir}; ${WRITTEN_MIB} MiB written before each wipe; ${RUNS} runs each`);
  console.log('| drive | wipe, median | per GiB | blocks of the file after |');
  console.log('| --- | --- | --- | --- |');
  for (const [i, size] of SIZES.entries()) {
    const file = join(dir, `drive${i}`);
    await writeFile(file, '');
    await truncate(file, size);
    const device = execFileSync('losetup', ['--find', '--show', '--direct-io=on', file], { encoding: 'utf8' }).trim();
    loops.push(device);
    const byIdName = `wwn-0x5000be0c0000000${i}`;
    await symlink(`../../${basename(device)}`, join(byIdDir, byIdName));
    const number = (await readFile(`/sys/class/block/${basename(device)}/dev`, 'utf8')).trim();
    const wiper = new DriveWiper({ diskDir, byIdDir, log: createLogger('bench', { level: 'error' }), sweepMs: 3_600_000 });
    const diskID = `drive-wwn-bench${i}`;
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      await dirty(device, size, Math.min(WRITTEN_MIB * MiB, size));
      await writeFile(join(diskDir, wipeRequestName(diskID)), formatWipeRequest({ token: `bench-${i}-${run}`, byIdName, device: number }));
      const t0 = performance.now();
      await wiper.look(diskID, true);
      times.push(performance.now() - t0);
      const answer = parseWipeAnswer(await readFile(join(diskDir, wipeAnswerName(diskID)), 'utf8'));
      if (!answer?.ok) throw new Error(`the wipe of ${device} failed: ${answer && !answer.ok ? answer.message : 'no answer'}`);
    }
    const median = quantile(times, 0.5);
    const blocks = (await stat(file)).blocks;
    const name = sizeLabel(size);
    figures[`wipeMsMedian_${name}`] = Number(median.toFixed(1));
    figures[`msPerGiB_${name}`] = Number((median / (size / GiB)).toFixed(1));
    figures[`blocksAfter_${name}`] = blocks;
    console.log(`| ${name} | ${median.toFixed(0)} ms | ${(median / (size / GiB)).toFixed(1)} ms | ${blocks} |`);
  }
  record.save(figures);
} finally {
  for (const device of loops) execFileSync('losetup', ['--detach', device]);
  await rm(dir, { recursive: true, force: true });
}
