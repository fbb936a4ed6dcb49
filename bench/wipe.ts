// How long the agent's wipe of a disk image takes (ADR 38), as a function of the image's size and of how
// much of it the previous owner wrote: agent/wipe-image.ts on real sparse files in a temporary dir of this
// machine's disk, each image written with WRITTEN MiB of data (spread over it) and synced first, then
// wiped RUNS times from a fresh write. Also the same image zeroed by writing, what a device without
// discard would need, for comparison (ZERO=0 skips it).
// `npm run bench:wipe` (SIZES=64Mi,1Gi,16Gi, WRITTEN=64, RUNS=5, ZERO=1: zeroing the 16Gi image is skipped
// unless ZERO_MAX_GIB allows, 1 by default).
import { mkdtemp, open, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { wipeImage } from '../agent/wipe-image.ts';
import { quantile } from './lib/samples.ts';
import { parseSizes, sizeLabel } from './lib/sizes.ts';
import { startRecord } from './lib/results.ts';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const SIZES = parseSizes('SIZES', process.env.SIZES ?? '64Mi,1Gi,16Gi');
const WRITTEN_MIB = Number(process.env.WRITTEN ?? 64);
const RUNS = Number(process.env.RUNS ?? 5);
const ZERO = process.env.ZERO !== '0';
const ZERO_MAX_GIB = Number(process.env.ZERO_MAX_GIB ?? 1);

/** A sparse image of `size` with `written` bytes of data in 1 MiB pieces spread over it, synced. */
async function dirtyImage(path: string, size: number, written: number): Promise<void> {
  await writeFile(path, '');
  await truncate(path, size);
  const pieces = Math.max(1, Math.round(written / MiB));
  const step = Math.floor(size / pieces);
  const chunk = Buffer.alloc(MiB, 0xa5);
  const fh = await open(path, 'r+');
  for (let i = 0; i < pieces; i++) await fh.write(chunk, 0, Math.min(MiB, size), i * step);
  await fh.sync();
  await fh.close();
}

/** What a wipe without truncation costs: zeros written over the whole image, synced. */
async function zeroByWriting(path: string, size: number): Promise<void> {
  const zeros = Buffer.alloc(8 * MiB);
  const fh = await open(path, 'r+');
  for (let at = 0; at < size; at += zeros.length) await fh.write(zeros, 0, Math.min(zeros.length, size - at), at);
  await fh.sync();
  await fh.close();
}

const record = startRecord('wipe', { sizes: SIZES.map(sizeLabel).join(','), writtenMiB: WRITTEN_MIB, runs: RUNS });
const dir = await mkdtemp(join(tmpdir(), 'nodedisks-bench-wipe-'));
const figures: Record<string, number> = {};
try {
  console.log(`dir ${dir}; ${WRITTEN_MIB} MiB written into each image before a wipe; ${RUNS} runs each`);
  console.log('size     wipe median ms  wipe p90 ms  blocks after  zero-by-writing ms');
  for (const size of SIZES) {
    const path = join(dir, 'disk1.img');
    const wipes: number[] = [];
    let blocksAfter = 0;
    for (let i = 0; i < RUNS; i++) {
      await dirtyImage(path, size, Math.min(WRITTEN_MIB * MiB, size));
      const t0 = performance.now();
      await wipeImage(dir, 'disk1');
      wipes.push(performance.now() - t0);
      blocksAfter = (await stat(path)).blocks;
    }
    let zeroMs = Number.NaN;
    if (ZERO && size <= ZERO_MAX_GIB * GiB) {
      await dirtyImage(path, size, Math.min(WRITTEN_MIB * MiB, size));
      const t0 = performance.now();
      await zeroByWriting(path, size);
      zeroMs = performance.now() - t0;
    }
    const name = sizeLabel(size);
    figures[`wipeMsMedian_${name}`] = Number(quantile(wipes, 0.5).toFixed(2));
    figures[`wipeMsP90_${name}`] = Number(quantile(wipes, 0.9).toFixed(2));
    figures[`blocksAfter_${name}`] = blocksAfter;
    if (!Number.isNaN(zeroMs)) figures[`zeroByWritingMs_${name}`] = Number(zeroMs.toFixed(0));
    console.log(
      `${name.padEnd(8)} ${quantile(wipes, 0.5).toFixed(2).padStart(14)}  ${quantile(wipes, 0.9).toFixed(2).padStart(11)}  ${String(blocksAfter).padStart(12)}  ${Number.isNaN(zeroMs) ? 'skipped' : zeroMs.toFixed(0)}`,
    );
    await rm(path, { force: true });
  }
  record.save(figures);
} finally {
  await rm(dir, { recursive: true, force: true });
}
