"""Lua scripts that make the scheduler's Redis writes atomic.

They run on a single Redis server (not Redis Cluster): one chunk of deliveries
touches several topic streams and the sink marker in one atomic step.
"""

from __future__ import annotations

from delayline.metrics import BUCKETS_MS, SUM_FIELD

#: The id of the ``count``-th entry after ``ARGV[1]`` (exclusive), or nil.
#: KEYS: inbound. ARGV: after_id, count.
LAST_ID_WITHIN = """
local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
if #entries == 0 then return false end
return entries[#entries][1]
"""

#: Add one batch's ingest counts once, however often the batch is replayed.
#: KEYS: ingest marker, stats. ARGV: batch, accepted, cancels, marker ttl seconds.
COUNT_INGEST = """
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
local batch = tonumber(ARGV[1])
if batch <= last then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[4])
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', KEYS[2], 'accepted', ARGV[2]) end
if tonumber(ARGV[3]) > 0 then redis.call('HINCRBY', KEYS[2], 'cancels', ARGV[3]) end
return 1
"""

#: Write one chunk of a sink partition and advance its marker, atomically.
#:
#: KEYS: marker, stats, lateness, rejects.
#: ARGV: batch, first, count, delivered_at_ms, marker ttl s, journal ttl s, then
#: ``count`` rows, each starting with a kind:
#:   'd' topic id body key headers deliver_at_ms attempt journal_key   (deliver)
#:   'x' id journal_key                                                 (dropped: cancelled)
#:   'r' status_key id reason n field1 value1 ... fieldn valuen         (rejected record;
#:       status_key and id are empty unless the record had a well-formed id)
#: The marker holds (batch, written): rows [0, written) of that batch are done.
#: Every attempt at a (query, batch, partition) writes the same rows in the same
#: order, so a chunk that starts before ``written`` (another attempt, say an
#: orphaned worker of a killed run, got further) writes nothing and the caller
#: resumes at ``written``; a chunk that starts after it would leave a gap and is
#: refused. Returns {written, delivered, duplicates, dropped, rejected}.
WRITE_CHUNK = (
    """
local batch = tonumber(ARGV[1])
local first = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
local now = ARGV[4]
local now_ms = tonumber(now)
local journal_ttl = tonumber(ARGV[6])
local state = redis.call('HMGET', KEYS[1], 'batch', 'written')
local written = 0
if tonumber(state[1]) == batch then written = tonumber(state[2]) end
if written > first then return {written, 0, 0, 0, 0} end
if written < first then
  return redis.error_reply('DELAYLINE_MARKER batch ' .. batch .. ': chunk starts at row '
    .. first .. ' but only ' .. written .. ' rows are written')
end
local bounds = {"""
    + ", ".join(str(bound) for bound in BUCKETS_MS)
    + """}
local delivered, duplicates, dropped, rejected = 0, 0, 0, 0
local expiring = {}
local late_counts = {}
local late_sum = 0
local function journal_put(journal, id, value)
  if journal_ttl <= 0 then return 1 end
  local fresh = redis.call('HSETNX', journal, id, value)
  if fresh == 1 and not expiring[journal] then
    expiring[journal] = true
    redis.call('EXPIRE', journal, journal_ttl)
  end
  return fresh
end
local i = 7
for _ = 1, count do
  local kind = ARGV[i]
  if kind == 'd' then
    local id, due = ARGV[i + 2], ARGV[i + 6]
    if journal_put(ARGV[i + 8], id, now) == 1 then
      redis.call('XADD', ARGV[i + 1], '*', 'id', id, 'body', ARGV[i + 3], 'key', ARGV[i + 4],
        'headers', ARGV[i + 5], 'deliver_at_ms', due, 'delivered_at_ms', now,
        'attempt', ARGV[i + 7])
      delivered = delivered + 1
      local late = now_ms - tonumber(due)
      late_sum = late_sum + late
      local label = '+Inf'
      for _, bound in ipairs(bounds) do
        if late <= bound then label = tostring(bound) break end
      end
      late_counts[label] = (late_counts[label] or 0) + 1
    else
      duplicates = duplicates + 1
    end
    i = i + 9
  elseif kind == 'x' then
    journal_put(ARGV[i + 2], ARGV[i + 1], 'cancelled')
    dropped = dropped + 1
    i = i + 3
  elseif kind == 'r' then
    local status_key, id, reason = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local n = tonumber(ARGV[i + 4])
    local fields = {}
    for j = 1, 2 * n do fields[j] = ARGV[i + 4 + j] end
    redis.call('XADD', KEYS[4], '*', unpack(fields))
    if status_key ~= '' and journal_ttl > 0 then
      redis.call('HSET', status_key, id, reason)
      redis.call('EXPIRE', status_key, journal_ttl)
    end
    rejected = rejected + 1
    i = i + 5 + 2 * n
  else
    return redis.error_reply('DELAYLINE_ROW unknown row kind ' .. tostring(kind))
  end
end
redis.call('HSET', KEYS[1], 'batch', ARGV[1], 'written', first + count)
redis.call('EXPIRE', KEYS[1], ARGV[5])
for name, value in pairs({delivered = delivered, duplicates = duplicates,
                          dropped = dropped, rejected = rejected}) do
  if value > 0 then redis.call('HINCRBY', KEYS[2], name, value) end
end
for label, value in pairs(late_counts) do redis.call('HINCRBY', KEYS[3], label, value) end
if delivered > 0 then redis.call('HINCRBY', KEYS[3], '"""
    + SUM_FIELD
    + """', late_sum) end
return {first + count, delivered, duplicates, dropped, rejected}
"""
)
