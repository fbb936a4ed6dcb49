// Shell completion. kubectl (1.26+) completes plugin arguments by running `kubectl_complete-nodedisks`,
// which calls `kubectl-nodedisks __complete …` with the words typed so far (the last one being completed)
// and reads cobra's format: one candidate per line, then ":<directive>" (a bit set: 2 = no space after
// the candidate, 4 = no file completion; 0 = the shell may complete file names when nothing is offered).
// `completion bash|zsh|fish|powershell` prints a script for the kubectl-nodedisks executable itself
// that speaks the same protocol.
import { GLOBAL_FLAGS, type CommandSpec, type FlagSpec } from '../args.ts';
import { kubeconfigNames } from '../../lib/kube/kubeconfig.ts';
import { listPages } from '../../lib/kube/pager.ts';
import { Session, type GlobalFlags, type Io } from '../context.ts';

export const SHELLS = ['bash', 'zsh', 'fish', 'powershell'] as const;

const DIRECTIVE = { default: 0, noSpace: 2, noFile: 4 } as const;

/** Values of flags that have a fixed set (beyond FlagSpec.choices). */
const FLAG_VALUES: Record<string, string[]> = {
  phase: ['Available', 'Reserved', 'Missing', 'Error', 'Discovered'],
  desired: ['Available', 'Reserved'],
  'dry-run': ['none', 'client', 'server'],
  'reclaim-policy': ['Delete', 'Retain'],
  for: ['phase=Reserved', 'phase=Available', 'phase=Missing', 'phase=Error', 'condition=Ready', 'condition=Ready=False'],
};
/** -o values by command; a value ending in "=" takes more text, so no space is added after it. */
const OUTPUTS: Record<string, string[]> = {
  list: ['wide', 'json', 'yaml', 'name', 'jsonpath=', 'jsonpath-file=', 'custom-columns=', 'custom-columns-file='],
  claim: ['name', 'yaml', 'json'],
  claims: ['wide', 'name', 'yaml', 'json'],
};
/** Flags whose value is a file or directory name: the shell completes those. */
const PATH_FLAGS = new Set(['kubeconfig', 'certificate-authority', 'dir']);

interface Typed {
  command: CommandSpec | undefined;
  /** Positional words after the command. */
  positionals: string[];
  /** Flag values given so far (the last of each wins, as in parsing). */
  values: Record<string, string>;
  /** The flag whose value the current word is, when the previous word is a flag that takes one. */
  pendingFlag: string | undefined;
}

function flagsOf(command: CommandSpec | undefined): Record<string, FlagSpec> {
  return { ...GLOBAL_FLAGS, ...(command?.flags ?? {}) };
}

function byName(flags: Record<string, FlagSpec>, word: string): string | undefined {
  if (word.startsWith('--')) return word.slice(2) in flags ? word.slice(2) : undefined;
  return Object.entries(flags).find(([, f]) => f.short === word.slice(1, 2))?.[0];
}

/** Reads the words typed before the current one: the command, its positionals, the flags' values. */
function readTyped(words: string[], commands: CommandSpec[]): Typed {
  const t: Typed = { command: undefined, positionals: [], values: {}, pendingFlag: undefined };
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (w.startsWith('-') && w.length > 1) {
      const flags = flagsOf(t.command);
      const eq = w.indexOf('=');
      const name = byName(flags, eq > 0 ? w.slice(0, eq) : w.startsWith('--') ? w : w.slice(0, 2));
      if (!name || flags[name]!.type !== 'string') continue;
      if (eq > 0) t.values[name] = w.slice(eq + 1);
      else if (flags[name]!.optionalValue)
        continue; // bare: the next word is not its value
      else if (!w.startsWith('--') && w.length > 2)
        t.values[name] = w.slice(2); // -ojson
      else if (i + 1 < words.length) t.values[name] = words[++i]!;
      else t.pendingFlag = name;
      continue;
    }
    if (!t.command) t.command = commands.find((c) => c.name === w || c.aliases?.includes(w));
    else t.positionals.push(w);
  }
  return t;
}

/** The session completion talks to the cluster with: the --kubeconfig, --context… typed earlier. */
function sessionFor(t: Typed, io: Io): Session {
  const flags: GlobalFlags = {};
  for (const name of Object.keys(GLOBAL_FLAGS)) {
    const v = t.values[name];
    if (v !== undefined && name !== 'as-group') (flags as Record<string, string>)[name] = v;
  }
  return new Session(flags, io);
}

export async function complete(io: Io, words: string[], commands: CommandSpec[]): Promise<void> {
  // PowerShell cannot pass an empty argument to a program everywhere: its script sends "" instead.
  const current = words.at(-1) === '""' ? '' : (words.at(-1) ?? '');
  const t = readTyped(words.slice(0, -1), commands);
  const { candidates, directive } = await candidatesFor(t, current, commands, io).catch(() => ({ candidates: [] as string[], directive: DIRECTIVE.noFile as number }));
  io.out(
    candidates
      .filter((c) => c.startsWith(current))
      .map((c) => `${c}\n`)
      .join('') + `:${directive}\n`,
  );
}

async function candidatesFor(t: Typed, current: string, commands: CommandSpec[], io: Io): Promise<{ candidates: string[]; directive: number }> {
  const noFile = (candidates: string[]) => ({ candidates, directive: DIRECTIVE.noFile | (candidates.some((c) => c.endsWith('=')) ? DIRECTIVE.noSpace : 0) });
  // The value of a flag: `--node <TAB>`, or `--node=<TAB>` (offered with the flag in front).
  const eq = current.indexOf('=');
  if (t.pendingFlag) return valuesOf(t, t.pendingFlag, '', io);
  if (current.startsWith('-') && eq > 0) {
    const name = byName(flagsOf(t.command), current.slice(0, eq));
    if (name) return valuesOf(t, name, current.slice(0, eq + 1), io);
  }
  if (current.startsWith('-')) {
    // Before the command only --help is accepted (kubectl nodedisks --help); flags follow the command.
    if (!t.command) return noFile(['--help']);
    return noFile(Object.keys(flagsOf(t.command)).map((n) => `--${n}`));
  }
  if (!t.command) return noFile(commands.map((c) => c.name).concat(commands.flatMap((c) => c.aliases ?? [])));
  const name = t.command.name;
  if (name === 'completion') return noFile(t.positionals.length ? [] : [...SHELLS]);
  if (name === 'gitops' && t.positionals.length === 0) return noFile(['reserve', 'release']);
  if (['list', 'status', 'reserve', 'release', 'cordon', 'uncordon', 'wait', 'gitops'].includes(name)) {
    return noFile(await columnValues(sessionFor(t, io), t.values.node, current, 'Name'));
  }
  return noFile([]);
}

async function valuesOf(t: Typed, flag: string, prefix: string, io: Io): Promise<{ candidates: string[]; directive: number }> {
  const spec = flagsOf(t.command)[flag];
  const of = (values: string[]) => ({
    candidates: values.map((v) => prefix + v),
    directive: DIRECTIVE.noFile | (values.some((v) => v.endsWith('=')) ? DIRECTIVE.noSpace : 0),
  });
  if (PATH_FLAGS.has(flag)) return { candidates: [], directive: DIRECTIVE.default };
  if (spec?.choices) return of([...spec.choices]);
  if (flag === 'output') return of(OUTPUTS[t.command?.name ?? ''] ?? ['yaml', 'json']);
  if (FLAG_VALUES[flag]) return of(FLAG_VALUES[flag]);
  if (flag === 'context' || flag === 'cluster' || flag === 'user') {
    const names = kubeconfigNames({ kubeconfig: t.values.kubeconfig });
    return of(flag === 'context' ? names.contexts : flag === 'cluster' ? names.clusters : names.users);
  }
  if (flag === 'disk') return of(await columnValues(sessionFor(t, io), t.values.node, '', 'Name'));
  if (flag === 'node') return of([...new Set(await columnValues(sessionFor(t, io), undefined, '', 'Node'))].sort());
  return of([]);
}

/** Pages of a completion's list: large, as only names travel (a Table without objects, ~100 bytes a row). */
const PAGE = 5000;
/** Completion must answer while someone waits at a prompt: what is found by then is offered. */
const DEADLINE_MS = 5000;
/** Rows read at most (10 pages of 5,000 at 50,000 NodeDisks). */
const MAX_NAMES = 200_000;

/**
 * One printer column (Name, Node) of the NodeDisks, values starting with `prefix`; of `node` only when
 * the command line names one (`--node X`): that is a field selector, so the server sends only that
 * node's disks. Every page is read (continue), up to a bound and a deadline, so values past the first
 * page are offered too.
 */
async function columnValues(session: Session, node: string | undefined, prefix: string, column: string): Promise<string[]> {
  try {
    const client = session.client();
    const deadline = Date.now() + DEADLINE_MS;
    const out: string[] = [];
    let read = 0;
    // listNames answers the Table's continue token beside the names: the pager reads it at metadata.continue.
    const fetch = (cont: string | undefined) =>
      client.listNames({ ...(node ? { fieldSelector: `spec.nodeName=${node}` } : {}), limit: PAGE, continue: cont }, column).then((page) => ({ ...page, metadata: page }));
    for await (const page of listPages(fetch)) {
      read += page.names.length;
      for (const n of page.names) if (n.startsWith(prefix)) out.push(n);
      if (read >= MAX_NAMES || Date.now() >= deadline) break;
    }
    return out;
  } finally {
    session.close();
  }
}

export function completionScript(shell: string): string {
  if (shell === 'zsh') return ZSH;
  if (shell === 'fish') return FISH;
  if (shell === 'powershell') return POWERSHELL;
  return BASH;
}

// Each script sends the words up to the cursor (the last one possibly empty) and reads the protocol above.
const BASH = `# bash completion for kubectl-nodedisks: source <(kubectl-nodedisks completion bash)
_kubectl_nodedisks() {
  local typed=\${COMP_LINE:0:COMP_POINT} cur=\${COMP_WORDS[COMP_CWORD]} line directive=0 word
  local -a words found=()
  # Split on blanks only (bash also breaks words at = and :, which flags like --for=phase=… contain).
  read -ra words <<< "$typed"
  [[ $typed =~ [[:space:]]$ ]] && words+=("")
  while IFS= read -r line; do
    if [[ $line == :* ]]; then directive=\${line#:}; else found+=("$line"); fi
  done < <(kubectl-nodedisks __complete "\${words[@]:1}" 2>/dev/null)
  # bash replaces only the part after the last = or : (its word breaks), so offer only that part.
  word=\${words[-1]}
  local strip=\${word%"$cur"}
  [[ -n $strip ]] && found=("\${found[@]#"$strip"}")
  COMPREPLY=("\${found[@]}")
  if (( \${#found[@]} == 0 && (directive & 4) == 0 )); then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  if (( directive & 2 )); then compopt -o nospace 2>/dev/null; fi
  return 0
}
complete -F _kubectl_nodedisks kubectl-nodedisks
`;

const ZSH = `#compdef kubectl-nodedisks
# zsh completion for kubectl-nodedisks: source <(kubectl-nodedisks completion zsh)
_kubectl_nodedisks() {
  local -a lines found
  local line directive=0
  lines=("\${(@f)$(kubectl-nodedisks __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  for line in "\${lines[@]}"; do
    if [[ $line == :* ]]; then directive=\${line#:}; elif [[ -n $line ]]; then found+=("$line"); fi
  done
  if (( \${#found} == 0 && (directive & 4) == 0 )); then _files; return; fi
  if (( directive & 2 )); then compadd -Q -S '' -- "\${found[@]}"; else compadd -Q -- "\${found[@]}"; fi
}
compdef _kubectl_nodedisks kubectl-nodedisks
`;

const FISH = `# fish completion for kubectl-nodedisks: kubectl-nodedisks completion fish | source
function __kubectl_nodedisks_complete
    set -l words (commandline -opc)[2..-1] (commandline -ct)
    set -l directive 0
    set -l found
    for line in (kubectl-nodedisks __complete $words 2>/dev/null)
        if string match -q -- ':*' $line
            set directive (string sub -s 2 -- $line)
        else
            set -a found $line
        end
    end
    if test (count $found) -eq 0; and test (math "bitand($directive, 4)") -eq 0
        __fish_complete_path (commandline -ct)
        return
    end
    printf '%s\\n' $found
end
complete -c kubectl-nodedisks -f -a '(__kubectl_nodedisks_complete)'
`;

const POWERSHELL = `# PowerShell completion for kubectl-nodedisks:
#   kubectl-nodedisks completion powershell | Out-String | Invoke-Expression
Register-ArgumentCompleter -Native -CommandName 'kubectl-nodedisks', 'kubectl-nodedisks.exe' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $words = @($commandAst.CommandElements | Select-Object -Skip 1 |
        Where-Object { $_.Extent.EndOffset -le $cursorPosition } | ForEach-Object { $_.Extent.Text })
    if ($wordToComplete -eq '') { $words += '""' }
    $directive = 0
    $found = @()
    foreach ($line in @(& kubectl-nodedisks __complete @words 2>$null)) {
        if ($line -like ':*') { $directive = [int]$line.Substring(1) } elseif ($line) { $found += $line }
    }
    if ($found.Count -eq 0 -and ($directive -band 4) -eq 0) { return }
    foreach ($c in $found) { [System.Management.Automation.CompletionResult]::new($c, $c, 'ParameterValue', $c) }
}
`;
