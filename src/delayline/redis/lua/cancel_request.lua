-- A library: the one writer of cancel requests, shared by cancel.lua and
-- reschedule.lua. A request's value is "<ms>" for a cancel and
-- "<ms>:<new id>:<new due ms>" for a reschedule (read by drop() in topic_writes.lua
-- and by status(); a change of the shard count may append ${VIA_INBOUND}, see drop()).
-- A request already recorded keeps its time. A message not settled yet leaves
-- the forecast at once (see forecast.lua), under its topic if the caller knows
-- it ('' otherwise).

--! include forecast.lua
--! include status_keys.lua
-- Returns whether the request is new, and whether it took an unsettled message
-- out of the forecast.
local function request_cancel(id, due, topic, new, now_ms_text, retention_ms)
  local minute = math.floor(tonumber(due) / ${CANCELS_BUCKET_MS})
  local requests = cancels_of(due)
  local request = now_ms_text
  if new ~= '' then request = now_ms_text .. ':' .. new end
  if redis.call('HSETNX', requests, id, request) == 0 then return false, false end
  redis.call('PEXPIREAT', requests, (minute + 1) * ${CANCELS_BUCKET_MS} + retention_ms)
  if redis.call('HEXISTS', journal_of(due), id) == 1 then return true, false end
  redis.call('HSET', requests, '${FORECAST_TAKEN}' .. id, topic)
  if topic == '' then pending_change(due, '', 0, 1, -1) else pending_add(due, topic, -1) end
  return true, true
end
