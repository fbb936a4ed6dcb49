// Constants shared by the agent, the controller and the plugin. Everything that more than one
// program must agree on lives here, so a rename is one edit.

export const GROUP = 'localtest.example.com';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = 'NodeDisk';
export const LIST_KIND = 'NodeDiskList';
export const PLURAL = 'nodedisks';
export const SINGULAR = 'nodedisk';
export const SHORT_NAME = 'ndisk';
export const CRD_NAME = `${PLURAL}.${GROUP}`;

/** Labels the agent sets at creation so people can select by node and disk. */
export const LABEL_NODE = `${GROUP}/node`;
export const LABEL_DISK = `${GROUP}/disk`;
/** Set by the agent when it creates a drive's NodeDisk: what the drive is (nvme, ssd, hdd), for selectors and classes (ADR 44). */
export const LABEL_MEDIA = `${GROUP}/media`;
/**
 * A drive's diskID is this prefix and its identity (ADR 44). A disk image's name may not begin so, so an
 * image and a drive never make one NodeDisk name.
 */
export const DRIVE_ID_PREFIX = 'drive-';
/** Where udev puts the stable names of a node's drives; the agent's --by-id-dir. */
export const DEFAULT_BY_ID_DIR = '/dev/disk/by-id';
/** Set by people or git, never by the programs: the controller's policy reads it. */
export const LABEL_AUTO_RESERVE = `${GROUP}/auto-reserve`;
export const AUTO_RESERVE_VALUE = 'true';
/**
 * Set by people or git (`kubectl nodedisks cordon`), never by the programs: a cordoned disk is handed out
 * by nobody (reserve --node, claims, the label policy), its existing reservation untouched (ADR 35).
 */
export const LABEL_CORDONED = `${GROUP}/cordoned`;
export const CORDONED_VALUE = 'true';
/**
 * Set by people or git on a NodeDisk: when the label policy releases the disk (the auto-reserve label
 * removed), it asks for a wipe too, so the next owner never reads this one's bytes (ADR 38).
 */
export const ANNOTATION_WIPE_ON_RELEASE = `${GROUP}/wipe-on-release`;
export const WIPE_ON_RELEASE_VALUE = 'true';

/** The owner the controller writes for label-driven reservations. */
export const AUTO_OWNER = 'auto';

/**
 * The agent's finalizer: "node-side reservation state may exist for this NodeDisk". Added before a marker
 * is written, removed only after it is gone, so deleting a reserved NodeDisk waits for its release (ADR 12).
 */
export const FINALIZER = `${GROUP}/reservation-protection`;

/**
 * The owner of a reservation the agent found on its node (a marker) with no NodeDisk holding it: it
 * re-creates the NodeDisk reserved under this owner rather than lose or hand out the disk (ADR 12).
 */
export const RECOVERED_OWNER = 'recovered-from-node';

/**
 * The owner the controller writes for a disk it binds to a NodeDiskClaim: this prefix, then the claim's
 * `<namespace>/<name>`, so `kubectl get ndisk -o wide` names the claim.
 */
export const CLAIM_OWNER_PREFIX = 'claim:';
/**
 * The owner the CSI driver writes for a disk it provisions as a PersistentVolume: this prefix, then the
 * PV's name; the owner UID is the PVC's (docs/adr/0039-csi-driver.md).
 */
export const PV_OWNER_PREFIX = 'pv:';
/** The CSI driver's name (CSIDriver object, StorageClass provisioner, PV spec.csi.driver). */
export const CSI_DRIVER = `nodedisks.${GROUP}`;
/** The topology key the CSI driver reports for each node: its value is the node's name. */
export const CSI_TOPOLOGY_KEY = `topology.nodedisks.${GROUP}/node`;
/**
 * Annotation on a Namespace, set by a cluster admin: how many disks the claims of that namespace may hold
 * at once, the disks retained for its deleted claims counted (a whole number; none: no limit).
 */
export const ANNOTATION_MAX_DISKS = `${GROUP}/max-disks`;

/** Server-side apply field managers: one per writer (see docs/design.md, "Who writes what"). */
export const FIELD_MANAGER = {
  agent: 'node-disks-agent',
  controller: 'node-disks-operator',
  plugin: 'kubectl-nodedisks',
  argocd: 'argocd-controller',
  flux: 'kustomize-controller',
  csiController: 'node-disks-csi-controller',
} as const;

/** Field managers that mean "git owns this field": the plugin points to the git route instead of fighting. */
export const GITOPS_FIELD_MANAGERS: readonly string[] = [FIELD_MANAGER.argocd, FIELD_MANAGER.flux];

/** Host directory the agent scans, and the suffixes of disk images and reservation markers in it. */
export const DEFAULT_DISK_DIR = '/var/lib/node-disks-manager/disks';
export const DISK_SUFFIX = '.img';
export const MARKER_SUFFIX = '.reserved';
export const MARKER_CONTENT = 'reserved\n';
/** The CSI node side's record of a disk staged on a loop device, beside the image (api/staged-record.ts). */
export const STAGED_SUFFIX = '.staged';

/**
 * The namespace the install puts its workloads, ServiceAccounts and Leases in (kustomize/namespace): the
 * default of every program's namespace flag when the pod's own namespace is not given.
 */
export const DEFAULT_SYSTEM_NAMESPACE = 'node-disks-system';

/** Names of the controller's conditions. */
export const CONDITION = {
  accepted: 'Accepted',
  ready: 'Ready',
  /** From the agent's status.node.health: False for a disk the kernel saw failing (not handed out, api/free-disk.ts). */
  healthy: 'Healthy',
} as const;

/** The Accepted reason when the label policy may not reserve a disk its agent saw failing (api/free-disk.ts failing). */
export const REASON_DISK_FAILING = 'DiskFailing';

/** The reasons of status.node.health and of the Healthy condition. */
export const HEALTH_REASON = {
  /** ext4 on the disk recorded errors. */
  filesystemErrors: 'FilesystemErrors',
  /** The drive's own count of failed IO commands. */
  ioErrors: 'IOErrors',
} as const;

/**
 * When a person last checked a failing disk (RFC 3339; `kubectl nodedisks uncordon` writes it): a failure
 * seen before it no longer keeps the disk from being handed out (api/free-disk.ts, agent/disk-health.ts).
 */
export const ANNOTATION_HEALTH_REVIEWED = `${GROUP}/health-reviewed`;

/**
 * The Ready reason of a NodeDisk whose Node object does not exist (deleted: a scale-down, a machine
 * replaced). What is not free because of it, and what `prune` removes, is read from this reason (ADR 35).
 */
/** Ready's reason when a disk's node agent has stopped renewing its heartbeat (or reporting): its report may be out of date. */
export const REASON_AGENT_STALE = 'AgentStale';
export const REASON_NODE_GONE = 'NodeGone';
/**
 * The Ready reason of a NodeDisk found on another machine than the Node of its name now is (the Node was
 * deleted and registered again: another UID). Not free either: it is not this machine's disk (ADR 35).
 */
export const REASON_NODE_REPLACED = 'NodeReplaced';
/**
 * The Accepted reason of a NodeDisk reserved for a claim that is gone (that UID: deleted with reclaimPolicy
 * Retain, or its namespace): the reservation is Released, its data kept. Only the controller writes it,
 * and the claims admission policy lets a person release a claim's reservation only while it is there.
 */
export const REASON_CLAIM_GONE = 'ClaimGone';

/** Kubernetes limits the name and label rules must respect. */
export const MAX_NAME_LENGTH = 253;
/** A claim's name fits the owner `claim:<namespace>/<name>` its disk carries into MAX_NAME_LENGTH. */
export const MAX_CLAIM_NAME_LENGTH = 183;
export const MAX_LABEL_VALUE_LENGTH = 63;
export const MAX_DISK_ID_LENGTH = 128;
export const MAX_OWNER_LENGTH = 253;
/** What the CRD accepts as spec.desired.owner (besides ''): what reserve and gitops check --owner against. */
export const OWNER_PATTERN = '^[A-Za-z0-9]([-A-Za-z0-9_.:@/]*[A-Za-z0-9])?$';
export const MAX_MESSAGE_LENGTH = 4096;
/** spec.desired.wipe, a wipe request's token: a claim's UID, a UUID, or the label policy's `auto-<resourceVersion>`. */
export const MAX_WIPE_TOKEN_LENGTH = 128;
export const WIPE_TOKEN_PATTERN = '^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$';
/** The Ready reason (and the free-disk kind) of a disk released with a wipe the agent has not reported done. */
export const REASON_WIPING = 'Wiping';

/** NodeDiskClaim: a team's namespaced request for one disk, which the controller binds to a free NodeDisk. */
export const CLAIM_KIND = 'NodeDiskClaim';
export const CLAIM_LIST_KIND = 'NodeDiskClaimList';
export const CLAIM_PLURAL = 'nodediskclaims';
export const CLAIM_SINGULAR = 'nodediskclaim';
export const CLAIM_SHORT_NAME = 'ndc';
export const CLAIM_CRD_NAME = `${CLAIM_PLURAL}.${GROUP}`;

/**
 * The controller's finalizer on a claim: "this claim may hold a disk". Removed once the disk is released
 * (or kept, for reclaimPolicy Retain), so deleting a claim, or its namespace, releases its disk.
 */
export const CLAIM_FINALIZER = `${GROUP}/release-disk`;

/** Names of a claim's conditions. */
export const CLAIM_CONDITION = {
  bound: 'Bound',
  ready: 'Ready',
  /** kstatus's abnormal-true condition: True when only a person can make the claim well again (kstatus: Failed). */
  stalled: 'Stalled',
} as const;
