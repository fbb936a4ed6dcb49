-- Argo CD health of a NodeDiskClaim (argocd-cm: resource.customizations.health.localtest.example.com_NodeDiskClaim).
-- Healthy when the claim is Bound and Ready (the marker is on the node) for the generation the controller
-- has seen; Degraded when a person must act (the disk is gone: Lost; or it is Missing, or its agent reports
-- an error, on the node; or its node is gone or another machine: NodeGone, NodeReplaced); Progressing while
-- the controller or the agent still has work to do.
local hs = {}

local function condition(conds, type)
  if conds == nil then return nil end
  for _, c in ipairs(conds) do
    if c.type == type then return c end
  end
  return nil
end

local meta = obj.metadata or {}
local generation = meta.generation or 0
local status = obj.status or {}
local conds = status.conditions

if meta.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Being deleted: waiting for the controller to release the disk (or keep it, with reclaimPolicy Retain)"
  return hs
end

if status.phase == nil or conds == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to look at this claim"
  return hs
end

if (status.observedGeneration or 0) < generation then
  hs.status = "Progressing"
  hs.message = "The controller has not acted on generation " .. tostring(generation) .. " yet"
  return hs
end

if status.phase == "Lost" then
  hs.status = "Degraded"
  hs.message = status.message or "The disk this claim was bound to is gone"
  return hs
end

if status.phase ~= "Bound" then
  hs.status = "Progressing"
  hs.message = status.message or "Waiting for a disk that fits"
  return hs
end

local ready = condition(conds, "Ready")
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Ready condition"
  return hs
end
if ready.status == "True" and (ready.observedGeneration == nil or ready.observedGeneration >= generation) then
  hs.status = "Healthy"
  hs.message = ready.message or "Ready"
  return hs
end
if ready.reason == "DiskMissing" or ready.reason == "AgentError" or ready.reason == "NodeGone" or ready.reason == "NodeReplaced" then
  hs.status = "Degraded"
  hs.message = ready.message or ready.reason
  return hs
end
hs.status = "Progressing"
hs.message = ready.message or "Waiting for the node agent"
return hs
