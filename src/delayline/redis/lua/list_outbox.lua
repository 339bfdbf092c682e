-- List what waits in the outbox, for a listing: up to ARGV[5] entries of topic
-- ARGV[6] and key ARGV[7] ('' for any), due in [ARGV[1], ARGV[2]] (scores),
-- looking at ARGV[4] entries at most from rank ARGV[3] of that range, so that
-- one call holds Redis briefly; the caller calls again from the returned rank.
-- KEYS: outbox, outbox data.
-- Returns {next rank or -1, then per entry: id, topic, key, due, attempt, body bytes}.

--! include outbox.lua
local offset, scan, limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', offset, scan)
local out = {-1}
local found = 0
for i, id in ipairs(ids) do
  local fields = outbox_get(KEYS[2], id)
  if fields then
    local topic, body, key, _, due, attempt = unpack(fields)
    if (ARGV[6] == '' or topic == ARGV[6]) and (ARGV[7] == '' or key == ARGV[7]) then
      for _, value in ipairs({id, topic, key, due, attempt, #body}) do out[#out + 1] = value end
      found = found + 1
      if found == limit then
        out[1] = offset + i
        return out
      end
    end
  end
end
if #ids == scan then out[1] = offset + scan end
return out
