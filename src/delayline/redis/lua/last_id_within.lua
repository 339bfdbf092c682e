-- The id of the count-th entry after after_id (exclusive); if fewer follow it,
-- the newest entry's (which may be after_id itself or older); nil if empty.
-- KEYS: inbound. ARGV: after_id, count.
--
-- The stream is trimmed up to each committed batch, so it seldom holds more than
-- count entries: then the newest is the answer, in O(1). Only a backlog pays for
-- copying count entries into Lua, a call that holds Redis for milliseconds. That
-- copy is collected before returning: Redis's Lua collects in small steps only,
-- so calls during a backlog piled up their copies, and Redis, built with libc's
-- allocator, kept the memory (100 MB of Lua heap while loading 1M sends).

if redis.call('XLEN', KEYS[1]) <= tonumber(ARGV[2]) then
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if #newest == 0 then return false end
  return newest[1][1]
end
local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
local last = entries[#entries]
entries = nil
collectgarbage()
if last == nil then return false end
return last[1]
