-- The id of the count-th entry after after_id (exclusive), looked for a page of
-- entries a call. Replies {id, 1} when the look ends: at the count-th entry,
-- or, if fewer follow after_id, at the newest entry (which may be after_id itself
-- or older; false if none follows); {id of the page-th entry, 0} when the look
-- goes on from that id, for count less page (delayline/redis/inbound.py).
-- KEYS: inbound. ARGV: after_id, count, page.
--
-- The stream is trimmed up to each committed batch, so it seldom holds more than
-- count entries: then the newest is the answer, in O(1). Only a backlog pays for
-- copying entries into Lua, and a call holds Redis for its whole copy while due
-- messages wait for the pump: 50,000 in one call held it 0.3 s, so a call copies
-- a page. That copy is collected before returning: Redis's Lua collects in
-- small steps only, so calls during a backlog piled up their copies, and Redis,
-- built with libc's allocator, kept the memory (100 MB of Lua heap while
-- loading 1M sends).

if redis.call('XLEN', KEYS[1]) <= tonumber(ARGV[2]) then
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if #newest == 0 then return {false, 1} end
  return {newest[1][1], 1}
end
local page = tonumber(ARGV[3])
local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', page)
local last, found = entries[#entries], #entries
entries = nil
collectgarbage()
if last == nil then return {false, 1} end
if found < page or page == tonumber(ARGV[2]) then return {last[1], 1} end
return {last[1], 0}
