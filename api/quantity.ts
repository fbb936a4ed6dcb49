// Kubernetes quantities (resource.Quantity's text form: 32Mi, 1G, 1.5Gi, 2e9) as a number of bytes, for a
// claim's spec.minCapacity. The CRD admits only what isQuantity() accepts; this reads the same grammar.

const QUANTITY = /^([+-]?)((?:\d+(?:\.\d*)?)|(?:\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;

const SUFFIX: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** The quantity in bytes, rounded up as Quantity.Value() does; undefined for text that is not a quantity. */
export function quantityBytes(text: string): number | undefined {
  const m = QUANTITY.exec(text.trim());
  if (!m) return undefined;
  const [, sign, number, suffix] = m;
  let factor = 1;
  if (suffix !== undefined) factor = suffix in SUFFIX ? SUFFIX[suffix]! : 10 ** Number(suffix.slice(1));
  const value = Number(number) * factor * (sign === '-' ? -1 : 1);
  return Number.isFinite(value) ? Math.ceil(value) : undefined;
}
