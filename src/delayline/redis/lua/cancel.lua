-- Record cancel requests: the pump and the sink drop a message that has one,
-- and status() answers "cancelled". A request already recorded keeps its time,
-- so a replayed batch changes nothing. A message not settled yet leaves the
-- forecast at once (see pending.lua), under its topic if the cancel names it.
-- A reschedule's request also names the new message ("<ms>:<new id>:<new due>"):
-- whoever drops the old one sends it again as the new one (see delivery.lua).
-- KEYS: none. ARGV: now ms, retention past the due minute ms, then per cancel:
-- id, deliver_at_ms, topic ('' when unknown), and '' or "<new id>:<new due ms>".
-- Returns how many took a message that was not settled yet out of the forecast.

--! include pending.lua
local now = ARGV[1]
local retention_ms = tonumber(ARGV[2])
local taken = 0
for i = 3, #ARGV, 4 do
  local id, due, topic, new = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local minute = math.floor(tonumber(due) / ${JOURNAL_BUCKET_MS})
  local requests = '${CANCELS_PREFIX}' .. string.format('%d', minute)
  local request = now
  if new ~= '' then request = now .. ':' .. new end
  if redis.call('HSETNX', requests, id, request) == 1 then
    redis.call('PEXPIREAT', requests, (minute + 1) * ${JOURNAL_BUCKET_MS} + retention_ms)
    local journal = '${JOURNAL_PREFIX}' .. string.format('%d', minute)
    if redis.call('HEXISTS', journal, id) == 0 then
      taken = taken + 1
      redis.call('HSET', requests, '~' .. id, topic)
      if topic == '' then pending_change(due, '', 0, 1, -1) else pending_add(due, topic, -1) end
    end
  end
end
pending_flush()
return taken
