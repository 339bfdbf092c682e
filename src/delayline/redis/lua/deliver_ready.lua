-- The second step of a sharded delivery (see topic_writes.lua), in the topic's
-- slot: write each entry of a shard's ready stream to its topic, once. An id
-- already written (a flush repeated after a crash, or by two flushers) is
-- skipped; the mark is kept per due second for the journal's time.
-- KEYS: the topic, the prefix of its written-ids hashes ({<topic>}-tagged).
-- ARGV: journal ttl s, then per entry: its ready entry id, n, and its n fields
-- and values (the topic entry's, and 'topic').
-- Returns {ready entry id, error} for each entry the topic could not take.

local ttl = tonumber(ARGV[1])
local failed = {}
local expiring = {}
local i = 2
while i <= #ARGV do
  local ready_id, n = ARGV[i], tonumber(ARGV[i + 1])
  local fields, f = {}, {}
  for j = i + 2, i + 1 + 2 * n, 2 do
    f[ARGV[j]] = ARGV[j + 1]
    if ARGV[j] ~= 'topic' then
      fields[#fields + 1] = ARGV[j]
      fields[#fields + 1] = ARGV[j + 1]
    end
  end
  local written = KEYS[2] .. ':' .. string.format('%d',
    math.floor(tonumber(f['deliver_at_ms']) / ${JOURNAL_BUCKET_MS}))
  if redis.call('HSETNX', written, f['id'], 1) == 1 then
    if not expiring[written] then
      expiring[written] = true
      redis.call('EXPIRE', written, ttl)
    end
    local added = redis.pcall('XADD', KEYS[1], '*', unpack(fields))
    if type(added) == 'table' and added.err then
      redis.call('HDEL', written, f['id'])
      failed[#failed + 1] = ready_id
      failed[#failed + 1] = added.err
    end
  end
  i = i + 2 + 2 * n
end
return failed
