// The CSI messages the driver reads and writes, as @grpc/proto-loader decodes them (csi/proto/load.ts:
// field names as in the spec, int64 as numbers, enums by name, every field present with its default,
// a oneof's chosen field named in its own property).

export type AccessMode =
  | 'UNKNOWN'
  | 'SINGLE_NODE_WRITER'
  | 'SINGLE_NODE_READER_ONLY'
  | 'MULTI_NODE_READER_ONLY'
  | 'MULTI_NODE_SINGLE_WRITER'
  | 'MULTI_NODE_MULTI_WRITER'
  | 'SINGLE_NODE_SINGLE_WRITER'
  | 'SINGLE_NODE_MULTI_WRITER';

export interface VolumeCapability {
  block?: Record<string, never> | null;
  mount?: { fs_type: string; mount_flags: string[]; volume_mount_group: string } | null;
  access_type?: 'block' | 'mount';
  access_mode?: { mode: AccessMode } | null;
}

export interface Topology {
  segments: Record<string, string>;
}

export interface CreateVolumeRequest {
  name: string;
  capacity_range?: { required_bytes: number; limit_bytes: number } | null;
  volume_capabilities: VolumeCapability[];
  parameters: Record<string, string>;
  volume_content_source?: object | null;
  accessibility_requirements?: { requisite: Topology[]; preferred: Topology[] } | null;
}

export interface Volume {
  capacity_bytes: number;
  volume_id: string;
  volume_context: Record<string, string>;
  accessible_topology: Topology[];
}

export interface DeleteVolumeRequest {
  volume_id: string;
}

export interface ValidateVolumeCapabilitiesRequest {
  volume_id: string;
  volume_context: Record<string, string>;
  volume_capabilities: VolumeCapability[];
  parameters: Record<string, string>;
}

export interface GetCapacityRequest {
  volume_capabilities: VolumeCapability[];
  parameters: Record<string, string>;
  accessible_topology?: Topology | null;
}

export interface NodeStageVolumeRequest {
  volume_id: string;
  publish_context: Record<string, string>;
  staging_target_path: string;
  volume_capability?: VolumeCapability | null;
  volume_context: Record<string, string>;
}

export interface NodeUnstageVolumeRequest {
  volume_id: string;
  staging_target_path: string;
}

export interface NodePublishVolumeRequest {
  volume_id: string;
  publish_context: Record<string, string>;
  staging_target_path: string;
  target_path: string;
  volume_capability?: VolumeCapability | null;
  readonly: boolean;
  volume_context: Record<string, string>;
}

export interface NodeUnpublishVolumeRequest {
  volume_id: string;
  target_path: string;
}

export interface NodeGetVolumeStatsRequest {
  volume_id: string;
  volume_path: string;
  staging_target_path: string;
}

export interface VolumeUsage {
  available: number;
  total: number;
  used: number;
  unit: 'UNKNOWN' | 'BYTES' | 'INODES';
}
