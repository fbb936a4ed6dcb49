// What a group of processes holds of the machine's memory together: the distinct physical pages mapped
// by any of them, each counted once. VmRSS counts a page in every process that maps it, so two programs
// running the same binary file (one page cache) add its pages twice; the sum of their PSS divides a
// page among every process that maps it, others included. This reads /proc/<pid>/pagemap, whose page
// frame numbers only root (CAP_SYS_ADMIN) sees: the benches and tests that use it run as root.
import { open, readFile } from 'node:fs/promises';

const PAGE = 4096;
const PRESENT = 1n << 63n;
const PFN_MASK = (1n << 55n) - 1n;
/** Read pagemap in pieces of this many pages, not a whole reservation at once. */
const CHUNK_PAGES = 65_536;

/**
 * The physical page frames a process maps now, resident ones only (swapped-out pages are not memory); with
 * `file`, only those of the mappings of a file whose path (as /proc/<pid>/maps names it) ends so.
 */
export async function pageFrames(pid: number, into = new Set<bigint>(), file?: string): Promise<Set<bigint>> {
  const maps = await readFile(`/proc/${pid}/maps`, 'utf8');
  const pagemap = await open(`/proc/${pid}/pagemap`, 'r');
  try {
    const buf = Buffer.alloc(CHUNK_PAGES * 8);
    let mapped = false;
    let present = 0;
    let withFrame = 0;
    for (const line of maps.split('\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) (\S{4})/.exec(line);
      // A range with no access (V8's reservations) maps no page; [vsyscall] is the kernel's, above any file offset.
      if (!m?.[1] || !m[2] || m[3]?.startsWith('---') || line.endsWith('[vsyscall]')) continue;
      if (file !== undefined && !line.endsWith(file)) continue;
      mapped = true;
      const first = Number.parseInt(m[1], 16) / PAGE;
      const end = Number.parseInt(m[2], 16) / PAGE;
      for (let at = first; at < end; at += CHUNK_PAGES) {
        const pages = Math.min(CHUNK_PAGES, end - at);
        const { bytesRead } = await pagemap.read(buf, 0, pages * 8, at * 8);
        for (let i = 0; i + 8 <= bytesRead; i += 8) {
          const entry = buf.readBigUInt64LE(i);
          if ((entry & PRESENT) === 0n) continue;
          present++;
          const pfn = entry & PFN_MASK;
          if (pfn === 0n) continue;
          withFrame++;
          into.add(pfn);
        }
      }
    }
    if (file !== undefined && !mapped) throw new Error(`process ${pid} maps no file ${file}`);
    if (present > 0 && withFrame === 0) throw new Error(`no page frame numbers in /proc/${pid}/pagemap: they are shown to root (CAP_SYS_ADMIN) only; run as root (sudo)`);
  } finally {
    await pagemap.close();
  }
  return into;
}

/** MiB of the distinct physical pages the processes map together (a page two of them share counts once). */
export async function distinctMiB(pids: readonly number[]): Promise<number> {
  const frames = new Set<bigint>();
  for (const pid of pids) await pageFrames(pid, frames);
  return (frames.size * PAGE) / 2 ** 20;
}
