-- The id of the inbound entry after after_id (exclusive) where a batch of weight
-- at most budget ends, looked for a page of entries a call. A record weighs 1, an
-- op=${OP_SCHEDULE} record ARGV[4]: a batch's time grows many times faster with
-- schedules than with sends (delayline/redis/inbound.py, SCHEDULE_WEIGHT).
-- Replies {id, 1, weight} when the look ends: where the budget is spent (the next
-- entry would overspend it; the first entry is taken whatever it weighs), or, if
-- less follows after_id, at the newest entry (which may be after_id itself or
-- older; false if none follows); {id of the page's last entry, 0, weight} when
-- the look goes on from that id, for budget less weight (delayline/redis/inbound.py).
-- KEYS: inbound. ARGV: after_id, budget, page, a schedule record's weight.
--
-- The stream is trimmed up to each committed batch, so it seldom holds more than
-- fits: then the newest is the answer, in O(1). Only a backlog pays for
-- copying entries into Lua, and a call holds Redis for its whole copy while due
-- messages wait for the pump: 50,000 in one call held it 0.3 s, so a call copies
-- a page. That copy is collected before returning: Redis's Lua collects in
-- small steps only, so calls during a backlog piled up their copies, and Redis,
-- built with libc's allocator, kept the memory (100 MB of Lua heap while
-- loading 1M sends).

local budget, heavy = tonumber(ARGV[2]), tonumber(ARGV[4])
if redis.call('XLEN', KEYS[1]) * heavy <= budget then
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if #newest == 0 then return {false, 1, 0} end
  return {newest[1][1], 1, 0}
end
local page = tonumber(ARGV[3])
local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', page)
local function weight(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'op' then
      if fields[i + 1] == '${OP_SCHEDULE}' then return heavy end
      return 1
    end
  end
  return 1
end
local last, spent, found = false, 0, #entries
local ended = found < page
for _, entry in ipairs(entries) do
  local w = weight(entry[2])
  if spent > 0 and spent + w > budget then ended = true break end
  last, spent = entry[1], spent + w
  if spent >= budget then ended = true break end
end
entries = nil
collectgarbage()
if ended then return {last, 1, spent} end
return {last, 0, spent}
