-- Argo CD health of a NodeDisk (argocd-cm: resource.customizations.health.localtest.example.com_NodeDisk).
-- Healthy only when the controller has acted on what git says now and the node agent reports it:
-- a label commit does not bump metadata.generation, so the label is compared with spec.desired too.
local hs = {}
local LABEL = "localtest.example.com/auto-reserve"

local function condition(conds, type)
  if conds == nil then return nil end
  for _, c in ipairs(conds) do
    if c.type == type then return c end
  end
  return nil
end

local labels = (obj.metadata and obj.metadata.labels) or {}
local desired = (obj.spec and obj.spec.desired) or {}
local state = desired.state or "Available"
local owner = desired.owner or ""
local generation = (obj.metadata and obj.metadata.generation) or 0
-- The controller's conditions and the generation they describe, where every tool looks (ADR 20).
local status = obj.status or {}
local conds = status.conditions

if conds == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to look at this disk"
  return hs
end

local accepted = condition(conds, "Accepted")
-- A label on a disk being wiped takes effect once the wipe is done: it gets better by itself (ADR 38).
if accepted ~= nil and accepted.status == "False" and accepted.reason == "Wiping" then
  hs.status = "Progressing"
  hs.message = accepted.message or "Waiting for the disk to be wiped"
  return hs
end
if accepted ~= nil and accepted.status == "False" then
  hs.status = "Degraded"
  hs.message = accepted.message or "The controller did not accept this NodeDisk"
  return hs
end

-- Its node agent saw the kernel report errors on it (Healthy False): a person must look, whatever else holds.
local healthy = condition(conds, "Healthy")
if healthy ~= nil and healthy.status == "False" then
  hs.status = "Degraded"
  hs.message = healthy.message or "The disk is failing"
  return hs
end

if (status.observedGeneration or 0) < generation then
  hs.status = "Progressing"
  hs.message = "The controller has not acted on generation " .. tostring(generation) .. " yet"
  return hs
end

local wantsAuto = labels[LABEL] == "true"
if wantsAuto and state ~= "Reserved" then
  hs.status = "Progressing"
  hs.message = "Label " .. LABEL .. "=true is waiting for the controller to reserve the disk"
  return hs
end
if (not wantsAuto) and state == "Reserved" and owner == "auto" then
  hs.status = "Progressing"
  hs.message = "Label " .. LABEL .. " is gone; waiting for the controller to release the disk"
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
if ready.reason == "AgentError" or ready.reason == "DiskMissing" then
  hs.status = "Degraded"
  hs.message = ready.message or ready.reason
  return hs
end
hs.status = "Progressing"
hs.message = ready.message or "Waiting for the node agent"
return hs
