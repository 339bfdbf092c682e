-- Record cancel requests (see cancel_request.lua): the pump and the sink drop a
-- message that has one, and status() answers "cancelled". A reschedule's
-- request also names the new message: whoever drops the old one sends it again
-- as the new one (see topic_writes.lua).
-- KEYS: the namespace of the messages' shard. ARGV: now ms, retention past the due minute ms, then per cancel:
-- id, deliver_at_ms, topic ('' when unknown), and '' or "<new id>:<new due ms>".
-- Returns how many took a message that was not settled yet out of the forecast.

local ns = KEYS[1]
--! include cancel_request.lua
local retention_ms = tonumber(ARGV[2])
local taken = 0
for i = 3, #ARGV, 4 do
  local _, took = request_cancel(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[1],
    retention_ms)
  if took then taken = taken + 1 end
end
pending_flush()
return taken
