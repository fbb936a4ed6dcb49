// Structured JSON logs, one object per line on stderr, as log collectors expect from a pod.
export type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  with(fields: Fields): Logger;
}

export function createLogger(component: string, opts: { level?: Level; write?: (line: string) => void; base?: Fields } = {}): Logger {
  const min = ORDER[opts.level ?? 'info'];
  const write = opts.write ?? ((line: string) => process.stderr.write(line + '\n'));
  const base = { component, ...(opts.base ?? {}) };
  const emit = (level: Level, msg: string, fields?: Fields) => {
    if (ORDER[level] < min) return;
    const entry: Fields = { ts: new Date().toISOString(), level, msg, ...base, ...fields };
    for (const [k, v] of Object.entries(entry)) {
      if (v instanceof Error) entry[k] = v.message;
    }
    write(JSON.stringify(entry));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    with: (fields) => createLogger(component, { ...opts, base: { ...opts.base, ...fields } }),
  };
}

export function parseLevel(v: string | undefined): Level {
  if (v === undefined || v === '') return 'info';
  if (v in ORDER) return v as Level;
  throw new Error(`invalid log level ${JSON.stringify(v)}: use debug, info, warn or error`);
}
