"""Lua scripts that make the scheduler's Redis writes atomic.

They run on a single Redis server (not Redis Cluster): one chunk of deliveries
touches several topic streams and the sink marker in one atomic step. "Due" is
judged by Redis's clock (``TIME``), the clock that stamps stream entry ids, so
no consumer can see an entry whose id is older than its ``deliver_at_ms``.
"""

from __future__ import annotations

import hashlib

from delayline.metrics import BUCKETS_MS, SUM_FIELD
from delayline.redis import keys

#: The id of the ``count``-th entry after ``ARGV[1]`` (exclusive); if fewer follow
#: it, the newest entry's (which may be ``ARGV[1]`` itself or older); nil if empty.
#: KEYS: inbound. ARGV: after_id, count.
#: The stream is trimmed up to each committed batch, so it seldom holds more than
#: ``count`` entries: then the newest is the answer, in O(1). Only a backlog pays
#: for copying ``count`` entries into Lua, a call that holds Redis for milliseconds.
#: That copy is collected before returning: Redis's Lua collects in small steps
#: only, so calls during a backlog piled up their copies, and Redis, built with
#: libc's allocator, kept the memory (100 MB of Lua heap while loading 1M sends).
LAST_ID_WITHIN = """
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

#: An entry due within this many ms of being put rings the pump's bell (see pump.py).
BELL_WITHIN_MS = 1_500

# The outbox's one encoding, written and read only through these two functions.
# Format 1 packs {1, topic, body, key, headers, deliver_at_ms, attempt, journal
# key, cancel-requests key}; an entry without the leading format number predates it.
# ``box`` is {outbox, outbox data, bell}: the keys, as the script was given them.
_OUTBOX = (
    """
local function outbox_put(box, now_ms, id, topic, body, key, headers, due, attempt, journal,
    cancels)
  local packed = cmsgpack.pack(1, topic, body, key, headers, due, attempt, journal, cancels)
  if redis.call('HSETNX', box[2], id, packed) == 0 then return false end
  redis.call('ZADD', box[1], due, id)
  if tonumber(due) - now_ms < """
    + str(BELL_WITHIN_MS)
    + """ then
    redis.call('LPUSH', box[3], 1)
    redis.call('LTRIM', box[3], 0, 0)
  end
  return true
end
local function outbox_get(outbox_data, id)
  local data = redis.call('HGET', outbox_data, id)
  if not data then return nil end
  local fields = {cmsgpack.unpack(data)}
  if type(fields[1]) == 'number' then
    if fields[1] ~= 1 then
      error({err = 'DELAYLINE_OUTBOX entry ' .. id .. ' has format ' .. fields[1]
        .. ', newer than this delayline reads'})
    end
    table.remove(fields, 1)
  end
  return fields
end
"""
)

# A status hash's name is its prefix and the due minute (keys.journal and friends).
_JOURNAL_PREFIX = keys.journal(0).removesuffix("0")
_CANCELS_PREFIX = keys.cancel_requests(0).removesuffix("0")

#: Schedule messages that are due soon: each straight into the outbox, or, if
#: Redis's clock says it is not due within the scheduler's horizon after all,
#: onto the inbound stream. The running scheduler publishes its horizon in the
#: config hash; ARGV[1] stands in while none has. Each message comes as its
#: inbound record (the one encoding the SDK writes), so it is sent once, not
#: twice; one call takes many, since a call's own cost in Redis is as large as
#: a message's.
#: KEYS: outbox, outbox data, outbox bell, inbound, stats, config.
#: ARGV: default horizon_ms, then per message: n, and its record's n fields and
#: values. Returns how many went to the outbox (or already wait there: an SDK
#: retry); the others went to the inbound stream.
SEND_NEAR = (
    _OUTBOX
    + """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local horizon_ms = tonumber(redis.call('HGET', KEYS[6], 'horizon_ms') or ARGV[1])
local box = {KEYS[1], KEYS[2], KEYS[3]}
local near, accepted = 0, 0
local i = 2
while i <= #ARGV do
  local last = i + 2 * tonumber(ARGV[i])
  local f = {}
  for j = i + 1, last, 2 do f[ARGV[j]] = ARGV[j + 1] end
  local due = f['deliver_at_ms']
  if tonumber(due) - now_ms > horizon_ms then
    redis.call('XADD', KEYS[4], '*', unpack(ARGV, i + 1, last))
  else
    near = near + 1
    local minute = string.format('%d', math.floor(tonumber(due) / """
    + str(keys.JOURNAL_BUCKET_MS)
    + """))
    if outbox_put(box, now_ms, f['id'], f['topic'], f['body'], f['key'] or '',
        f['headers'] or '{}', due, f['attempt'] or '1', '"""
    + _JOURNAL_PREFIX
    + """' .. minute, '"""
    + _CANCELS_PREFIX
    + """' .. minute) then
      accepted = accepted + 1
    end
  end
  i = last + 1
end
if accepted > 0 then redis.call('HINCRBY', KEYS[5], 'accepted', accepted) end
return near
"""
)
SEND_NEAR_SHA = hashlib.sha1(SEND_NEAR.encode()).hexdigest()

# keys.rejected(due) is this prefix and the due minute; a failed delivery is recorded there.
_REJECTED_PREFIX = keys.rejected(0).removesuffix("0")

# Shared by WRITE_CHUNK and PUMP: the clock, the journal, delivery, rejects, and counters.
# Expects journal_ttl and rejects_key to be set before use.
_DELIVERY = (
    _OUTBOX
    + """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now = string.format('%d', now_ms)
local bounds = {"""
    + ", ".join(str(bound) for bound in BUCKETS_MS)
    + """}
local counts = {delivered = 0, duplicates = 0, dropped = 0, rejected = 0, cascaded = 0}
local late_counts, late_sum = {}, 0
local expiring = {}
local function journal_put(journal, id, value)
  if journal_ttl <= 0 then return 1 end
  local fresh = redis.call('HSETNX', journal, id, value)
  if fresh == 1 and not expiring[journal] then
    expiring[journal] = true
    redis.call('EXPIRE', journal, journal_ttl)
  end
  return fresh
end
-- fields: name, value, ... as XADD takes them. status_key and id name the hash
-- that tells status() "rejected" with the reason; '' for a record without an id.
local function add_reject(fields, status_key, id, reason)
  redis.call('XADD', rejects_key, '*', unpack(fields))
  if status_key ~= '' and journal_ttl > 0 then
    redis.call('HSET', status_key, id, reason)
    redis.call('EXPIRE', status_key, journal_ttl)
  end
  counts.rejected = counts.rejected + 1
end
local function deliver(topic, id, body, key, headers, due, attempt, journal)
  if journal_put(journal, id, now) ~= 1 then
    counts.duplicates = counts.duplicates + 1
    return
  end
  local added = redis.pcall('XADD', topic, '*', 'id', id, 'body', body, 'key', key,
    'headers', headers, 'deliver_at_ms', due, 'delivered_at_ms', now, 'attempt', attempt)
  if type(added) == 'table' and added.err then
    -- The topic key holds another type (WRONGTYPE), or cannot take an entry:
    -- raising would fail the chunk on every retry, for good. Keep the message
    -- as a reject, and take back its journal entry: it was not delivered.
    if journal_ttl > 0 then redis.call('HDEL', journal, id) end
    local reason = 'cannot deliver to topic ' .. topic .. ': ' .. added.err
    local status_key = '"""
    + _REJECTED_PREFIX
    + """' .. string.format('%d', math.floor(tonumber(due) / """
    + str(keys.JOURNAL_BUCKET_MS)
    + """))
    add_reject({'id', id, 'topic', topic, 'body', body, 'key', key, 'headers', headers,
      'deliver_at_ms', due, 'attempt', attempt, 'reason', reason, 'rejected_at_ms', now},
      status_key, id, reason)
    return
  end
  counts.delivered = counts.delivered + 1
  local late = now_ms - tonumber(due)
  late_sum = late_sum + late
  local label = '+Inf'
  for _, bound in ipairs(bounds) do
    if late <= bound then label = tostring(bound) break end
  end
  late_counts[label] = (late_counts[label] or 0) + 1
end
-- Deliver the message waiting under id in the outbox data hash, or drop it if the
-- SDK recorded a cancel for it; the caller removes it from the outbox. False if
-- none waits.
local function deliver_waiting(outbox_data, id)
  local fields = outbox_get(outbox_data, id)
  if not fields then return false end
  local topic, body, key, headers, due, attempt, journal, cancels = unpack(fields)
  if redis.call('HEXISTS', cancels, id) == 1 then
    journal_put(journal, id, 'cancelled')
    counts.dropped = counts.dropped + 1
  else
    deliver(topic, id, body, key, headers, due, attempt, journal)
  end
  return true
end
local function flush_counts(stats, lateness)
  for name, value in pairs(counts) do
    if value > 0 then redis.call('HINCRBY', stats, name, value) end
  end
  for label, value in pairs(late_counts) do redis.call('HINCRBY', lateness, label, value) end
  if counts.delivered > 0 then redis.call('HINCRBY', lateness, '"""
    + SUM_FIELD
    + """', late_sum) end
end
"""
)

#: Write one chunk of a sink partition and advance its marker, atomically.
#:
#: KEYS: marker, stats, lateness, rejects, outbox, outbox data, inbound, outbox bell.
#: ARGV: batch, first, count, marker ttl s, journal ttl s, then ``count`` rows,
#: each starting with a kind:
#:   'd' topic id body key headers deliver_at_ms attempt journal_key cancel_key   (deliver)
#:   'c' id topic body key headers deliver_at_ms attempt                          (cascade)
#:   'x' id journal_key                                                           (dropped)
#:   'r' status_key id reason n field1 value1 ... fieldn valuen                   (rejected)
#: A message already due goes to its topic now; one not yet due waits in the
#: outbox (a sorted set by due time) for the pump. If a message with its id
#: waits there already, that first one wins: this one is a duplicate, and if
#: due, the first goes now. A message whose topic key is not a stream becomes a
#: reject. A cascade goes back to the inbound
#: stream, marked ``cascade=1``. ``status_key`` and ``id`` of a reject are empty
#: unless it was a send with a well-formed id.
#:
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
local journal_ttl = tonumber(ARGV[5])
local rejects_key = KEYS[4]
local state = redis.call('HMGET', KEYS[1], 'batch', 'written')
local written = 0
if tonumber(state[1]) == batch then written = tonumber(state[2]) end
if written > first then return {written, 0, 0, 0, 0} end
if written < first then
  return redis.error_reply('DELAYLINE_MARKER batch ' .. batch .. ': chunk starts at row '
    .. first .. ' but only ' .. written .. ' rows are written')
end
"""
    + _DELIVERY
    + """
local i = 6
for _ = 1, count do
  local kind = ARGV[i]
  if kind == 'd' then
    local id, due = ARGV[i + 2], ARGV[i + 6]
    -- A message whose id already waits in the outbox is a duplicate: the first one wins.
    if tonumber(due) > now_ms then
      if not outbox_put({KEYS[5], KEYS[6], KEYS[8]}, now_ms, id, ARGV[i + 1], ARGV[i + 3],
          ARGV[i + 4], ARGV[i + 5], due, ARGV[i + 7], ARGV[i + 8], ARGV[i + 9]) then
        counts.duplicates = counts.duplicates + 1
      end
    elseif deliver_waiting(KEYS[6], id) then
      -- Due as well (same id, same time): it goes now, ahead of the pump.
      redis.call('ZREM', KEYS[5], id)
      redis.call('HDEL', KEYS[6], id)
      counts.duplicates = counts.duplicates + 1
    else
      deliver(ARGV[i + 1], id, ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], due, ARGV[i + 7],
        ARGV[i + 8])
    end
    i = i + 10
  elseif kind == 'c' then
    local record = {'v', '1', 'op', 'send', 'id', ARGV[i + 1], 'topic', ARGV[i + 2],
      'body', ARGV[i + 3], 'headers', ARGV[i + 5], 'deliver_at_ms', ARGV[i + 6],
      'attempt', ARGV[i + 7], 'cascade', '1'}
    if ARGV[i + 4] ~= '' then
      record[#record + 1] = 'key'
      record[#record + 1] = ARGV[i + 4]
    end
    redis.call('XADD', KEYS[7], '*', unpack(record))
    counts.cascaded = counts.cascaded + 1
    i = i + 8
  elseif kind == 'x' then
    journal_put(ARGV[i + 2], ARGV[i + 1], 'cancelled')
    counts.dropped = counts.dropped + 1
    i = i + 3
  elseif kind == 'r' then
    local n = tonumber(ARGV[i + 4])
    local fields = {}
    for j = 1, 2 * n do fields[j] = ARGV[i + 4 + j] end
    add_reject(fields, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
    i = i + 5 + 2 * n
  else
    return redis.error_reply('DELAYLINE_ROW unknown row kind ' .. tostring(kind))
  end
end
redis.call('HSET', KEYS[1], 'batch', ARGV[1], 'written', first + count)
redis.call('EXPIRE', KEYS[1], ARGV[4])
flush_counts(KEYS[2], KEYS[3])
return {first + count, counts.delivered, counts.duplicates, counts.dropped, counts.rejected}
"""
)

#: Move up to ARGV[1] due messages from the outbox to their topics, atomically.
#:
#: A message whose id the SDK recorded a cancel for meanwhile is dropped instead;
#: one whose topic key is not a stream becomes a reject.
#: KEYS: outbox, outbox data, stats, lateness, rejects. ARGV: max messages, journal ttl s.
#: Returns {moved, now_ms, next due ms or -1}.
PUMP = (
    """
local journal_ttl = tonumber(ARGV[2])
local rejects_key = KEYS[5]
"""
    + _DELIVERY
    + """
local due_ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])
for _, id in ipairs(due_ids) do deliver_waiting(KEYS[2], id) end
if #due_ids > 0 then
  redis.call('ZREM', KEYS[1], unpack(due_ids))
  redis.call('HDEL', KEYS[2], unpack(due_ids))
end
flush_counts(KEYS[3], KEYS[4])
local next_due = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {#due_ids, now, next_due[2] or '-1'}
"""
)
