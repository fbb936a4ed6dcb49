// Values printed the way kubectl (Go) prints them, so output compares byte for byte:
// - goJson: encoding/json (map keys sorted, <, >, & escaped as \u003c…), compact or 4-space indented;
// - goText: a scalar as fmt.Print writes it (strings raw, numbers, true/false);
// - goValue: fmt's %v, which custom-columns uses (map[k:v k2:v2], [a b]).

/** A copy with every object's keys sorted, as Go marshals a map. */
export function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(o)
        .sort()
        .filter((k) => o[k] !== undefined)
        .map((k) => [k, sortKeys(o[k])]),
    );
  }
  return v;
}

const HTML_ESCAPES: Record<string, string> = { '<': '\\u003c', '>': '\\u003e', '&': '\\u0026', '\u2028': '\\u2028', '\u2029': '\\u2029' };

export function goJson(v: unknown, indent?: string): string {
  // JSON text has these characters only inside strings, so escaping them everywhere is what Go does.
  return JSON.stringify(sortKeys(v), null, indent).replace(/[<>&\u2028\u2029]/g, (c) => HTML_ESCAPES[c]!);
}

export function goText(v: unknown): string {
  if (v === undefined || v === null) return '<nil>';
  return String(v);
}

export function goValue(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(goValue).join(' ')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `map[${Object.keys(o)
      .sort()
      .map((k) => `${k}:${goValue(o[k])}`)
      .join(' ')}]`;
  }
  return goText(v);
}
