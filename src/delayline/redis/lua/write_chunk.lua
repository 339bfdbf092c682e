-- Write one chunk of a sink partition and advance its marker, atomically.
--
-- KEYS: marker, stats, lateness, rejects, outbox, outbox data, inbound, outbox bell.
-- ARGV: batch, first, count, marker ttl s, journal ttl s, then count rows,
-- each starting with a kind:
--   'd' topic id body key headers deliver_at_ms attempt journal_key cancel_key   (deliver)
--   'c' id topic body key headers deliver_at_ms attempt                          (cascade)
--   'x' id topic deliver_at_ms journal_key cancel_key                             (dropped)
--   'r' status_key id reason n field1 value1 ... fieldn valuen                   (rejected)
-- A message already due goes to its topic now, unless a cancel was requested
-- for it (then it is dropped); one not yet due waits in the outbox (a sorted
-- set by due time) for the pump, which checks for a cancel in turn. If a message with its id
-- waits there already, that first one wins: this one is a duplicate, and if
-- due, the first goes now. A message whose topic key is not a stream becomes a
-- reject. A cascade goes back to the inbound stream, marked cascade=1.
-- status_key and id of a reject are empty unless it was a send with a
-- well-formed id.
--
-- The marker holds (batch, written): rows [0, written) of that batch are done.
-- Every attempt at a (query, batch, partition) writes the same rows in the same
-- order, so a chunk that starts before written (another attempt, say an
-- orphaned worker of a killed run, got further) writes nothing and the caller
-- resumes at written; a chunk that starts after it would leave a gap and is
-- refused. Returns {written, delivered, duplicates, dropped, rejected}.

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
--! include delivery.lua
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
        pending_add(due, ARGV[i + 1], -1)
      end
    elseif deliver_waiting(KEYS[6], id) then
      -- Due as well (same id, same time): it goes now, ahead of the pump.
      redis.call('ZREM', KEYS[5], id)
      redis.call('HDEL', KEYS[6], id)
      counts.duplicates = counts.duplicates + 1
      pending_add(due, ARGV[i + 1], -1)
    else
      deliver_or_drop(ARGV[i + 1], id, ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], due, ARGV[i + 7],
        ARGV[i + 8], ARGV[i + 9])
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
    drop(ARGV[i + 2], ARGV[i + 1], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
    i = i + 6
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
