-- Trim the head of a topic stream by its retention (see delayline/retention.py).
--
-- Every trim removes whole stream nodes (XTRIM ... ~ ... LIMIT) and reads no
-- entry: reading the entries to place the cut exactly took Redis's thread 30 to
-- 60 ms per 1,000 under load (docs/benchmarks.md, "Soak"). So a stream keeps
-- about its max len, as with MAXLEN ~: never fewer, and up to a node more. The
-- soft bounds (max age, max len) never cut past the first id a consumer group
-- still needs; the hard cap does, and what it removes past that id is counted
-- as unread (to within a node: the one that holds that id).
-- KEYS: the topic stream.
-- ARGV: max age ms, max len, hard max len (0: no such bound), the first id a
-- consumer group still needs ('' if none does), most entries to remove a call.
-- Returns {removed, removed that a group still needed, 1 if more may go}.

local max_age, max_len, hard = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local needed, budget = ARGV[4], tonumber(ARGV[5])
local length = redis.call('XLEN', KEYS[1])
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
-- Whole nodes of entries before cut, never past the first id needed, at most
-- limit entries (LIMIT 0 would mean no limit).
local function trim_before(cut, limit)
  if limit < 1 then return 0 end
  if needed ~= '' then
    local ms, seq = parse(cut)
    local needed_ms, needed_seq = parse(needed)
    if needed_ms < ms or (needed_ms == ms and needed_seq < seq) then cut = needed end
  end
  return redis.call('XTRIM', KEYS[1], 'MINID', '~', cut, 'LIMIT', limit)
end
local removed, unread = 0, 0
if max_age > 0 then
  local t = redis.call('TIME')
  local cut_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - max_age
  removed = trim_before(string.format('%d-0', cut_ms), budget)
end
-- Past the newest max len (or hard max len): what comes before the last entry,
-- but no more than the excess, which LIMIT keeps to.
local function excess(bound) return length - removed - bound end
if (max_len > 0 and excess(max_len) > 0) or (hard > 0 and excess(hard) > 0) then
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1][1]
  local bound = max_len
  if bound <= 0 or (hard > 0 and hard < bound) then bound = hard end
  removed = removed + trim_before(last, math.min(budget - removed, excess(bound)))
  if hard > 0 and excess(hard) > 0 then
    local cut = redis.call('XTRIM', KEYS[1], 'MAXLEN', '~', hard, 'LIMIT',
      math.max(budget - removed, 1))
    removed = removed + cut
    if needed ~= '' then unread = cut end
  end
end
local more = 0
if removed * 2 >= budget then more = 1 end
return {removed, unread, more}
