// Byte sizes as the benches take them from the environment (SIZES=64Mi,1Gi) and print them.

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** A list such as `64Mi,1Gi` in bytes; `name` is the variable, for the error. */
export function parseSizes(name: string, list: string): number[] {
  return list.split(',').map((s) => {
    const m = /^(\d+)(Mi|Gi)$/.exec(s.trim());
    if (!m) throw new Error(`${name}: ${s} is not <n>Mi or <n>Gi`);
    return Number(m[1]) * (m[2] === 'Gi' ? GiB : MiB);
  });
}

export const sizeLabel = (bytes: number): string => (bytes >= GiB ? `${bytes / GiB}Gi` : `${bytes / MiB}Mi`);
