-- Trim the head of a topic stream by its retention (see delayline/retention.py),
-- at most ARGV[5] entries a call, so that a long trim never holds Redis up.
-- An entry goes if it is older than the max age or beyond the newest max len
-- entries, and no consumer group needs it (its id is before the first needed);
-- or, whoever needs it, if it is beyond the newest hard max len entries.
-- KEYS: the topic stream.
-- ARGV: max age ms, max len, hard max len (0: no such bound), the first id a
-- consumer group still needs ('' if none does), most entries to remove.
-- Returns {removed, removed that a group still needed, length after, 1 if more
-- may go}.

local max_age, max_len, hard = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local needed, budget = ARGV[4], tonumber(ARGV[5])
local length = redis.call('XLEN', KEYS[1])
local over_len, over_hard = 0, 0
if max_len > 0 then over_len = length - max_len end
if hard > 0 then over_hard = length - hard end
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local needed_ms, needed_seq = 0, 0
if needed ~= '' then needed_ms, needed_seq = parse(needed) end
local function still_needed(ms, seq)
  return needed ~= '' and (ms > needed_ms or (ms == needed_ms and seq >= needed_seq))
end
-- The candidates are a prefix of the stream: the entries older than the max
-- age, or the first over_len or over_hard by position, whichever is longer.
local candidates, cutoff_ms = {}, 0
if max_age > 0 then
  local t = redis.call('TIME')
  cutoff_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - max_age
  candidates = redis.call('XRANGE', KEYS[1], '-', '(' .. string.format('%d', cutoff_ms) .. '-0',
    'COUNT', budget)
end
local by_position = math.min(math.max(over_len, over_hard), budget)
if by_position > #candidates then
  candidates = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', by_position)
end
local removed, unread, last = 0, 0, nil
for i, entry in ipairs(candidates) do
  local ms, seq = parse(entry[1])
  local soft = i <= over_len or (max_age > 0 and ms < cutoff_ms)
  local need = still_needed(ms, seq)
  if (soft and not need) or i <= over_hard then
    removed = i
    last = entry[1]
    if need then unread = unread + 1 end
  else
    break
  end
end
if removed > 0 then
  local ms, seq = parse(last)
  redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d-%d', ms, seq + 1))
end
local more = 0
if removed == budget then more = 1 end
return {removed, unread, length - removed, more}
