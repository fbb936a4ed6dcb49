// The CRD's rule that a NodeDisk's name is the canonical name of its own spec (api/names.ts nodeDiskName),
// written in CEL so the API server refuses an alias (ADR 12). CEL has no regex
// replacement and no hash function, so:
// - normalization is spelled out: lowercase; '.' and '_' (the only other characters a valid nodeName or
//   diskID may hold) become '-'; runs of dashes collapse by repeated halving ('--' → '-' as often as the
//   longest possible run needs); the one trailing dash a diskID can leave is cut with a sentinel;
// - a name too long to be kept whole must be the cut head followed by '-' and 10 hex digits; whether those
//   digits are the right hash only the agent can tell (it reports such an alias and never acts on it).
import { MAX_DISK_ID_LENGTH, MAX_NAME_LENGTH } from '../constants.ts';
import { HASH_LENGTH, HASHED_HEAD_LENGTH } from '../names.ts';

/** '#' can occur in neither a node name nor a diskID: it marks the end while dashes collapse. */
const END = '#';

/** Halvings that bring the longest run of dashes (a whole node name, or a whole diskID) down to one. */
const COLLAPSE_PASSES = Math.ceil(Math.log2(Math.max(MAX_NAME_LENGTH, MAX_DISK_ID_LENGTH))) + 1;

function collapseAndTrim(expr: string): string {
  return `(${expr})${".replace('--', '-')".repeat(COLLAPSE_PASSES)}.replace('-${END}', '').replace('${END}', '')`;
}

/** CEL for the full (unshortened) canonical name of a NodeDisk, with `self` the object. */
const full = collapseAndTrim(`'node-disk-' + self.spec.nodeName.lowerAscii().replace('.', '-') + '-' + ` + `self.spec.diskID.lowerAscii().replace('.', '-').replace('_', '-') + '${END}'`);

const shortened =
  `self.metadata.name.matches('^[a-z0-9-]+-[0-9a-f]{${HASH_LENGTH}}$') && ` +
  `self.metadata.name.substring(0, size(self.metadata.name) - ${HASH_LENGTH + 1}) == ${collapseAndTrim(`${full}.substring(0, ${HASHED_HEAD_LENGTH}) + '${END}'`)}`;

const hasIdentity = 'has(self.spec) && has(self.spec.nodeName) && has(self.spec.diskID)';

/** The rule: with an identity, the name is the full canonical name, or (when that is too long) its cut head plus a hash. */
export const canonicalNameRule = {
  rule: `!(${hasIdentity}) || (size(${full}) <= ${MAX_NAME_LENGTH} ? self.metadata.name == ${full} : ${shortened})`,
  messageExpression:
    `'metadata.name must be ' + (size(${full}) <= ${MAX_NAME_LENGTH} ? ${full} : ${collapseAndTrim(`${full}.substring(0, ${HASHED_HEAD_LENGTH}) + '${END}'`)} + '-<hash>') + ` +
    `', the canonical name of spec.nodeName and spec.diskID (node-disk-<node>-<disk>, normalized); an alias of a disk would be acted on by nothing'`,
  reason: 'FieldValueInvalid',
  fieldPath: '.metadata',
} as const;
