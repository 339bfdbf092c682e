-- Write one chunk of a sink partition and advance its marker, atomically.
--
-- KEYS: marker, stats, lateness, rejects, outbox, outbox data, inbound, outbox bell,
-- namespace.
-- ARGV: batch, first, count, marker ttl s, journal ttl s, horizon ms, fencing token
-- (fence.lua), then count rows, each starting with a kind:
--   'd' topic id body key headers deliver_at_ms attempt journal_key cancel_key   (deliver)
--   'x' (the same)                                                               (dropped)
--   'c' (the same)                                                               (cascade)
--   'n' (the same)                                           (a schedule's run: counted, delivered)
--   'm' (the same)                      (a run its schedule counted ahead: its second counted too)
--   'k' id deliver_at_ms topic                      (a schedule's revoked run: a cancel request)
--   'f' topic minute_ms delta                  (a change of a minute's count of runs ahead)
--   'r' status_key id reason n field1 value1 ... fieldn valuen                   (rejected)
-- A message already due goes to its topic now, unless a cancel was requested
-- for it (then it is dropped); one not yet due, or of a topic with a delivery
-- limit, waits in the outbox (a sorted set by due time) for the pump, which checks
-- for a cancel in turn and applies the limit. If a message with its id
-- waits there already, that first one wins: this one is a duplicate, and if
-- due, the first goes now. A message whose topic key is not a stream becomes a
-- reject. A dropped message whose cancel was a reschedule's is sent again under
-- its new id. A cascade goes back to the inbound stream, marked cascade=1. A
-- schedule's run is counted as accepted and into the forecast (no producer's send
-- counted it), then written as a delivery; one its schedule counted ahead in the
-- forecast's minute is counted in its second only. A revoked run gets a cancel
-- request, kept as long as the journal, as the SDK's cancel makes.
-- status_key and id of a reject are empty unless it was a send with a
-- well-formed id.
--
-- The marker holds (batch, written): rows [0, written) of that batch are done.
-- Every attempt at a (query, batch, partition) writes the same rows in the same
-- order, so a chunk that starts before written (another attempt, say an
-- orphaned worker of a killed run, got further) writes nothing and the caller
-- resumes at written; a chunk that starts after it would leave a gap and is
-- refused. Returns {written, delivered, duplicates, dropped, rejected}.

local ns = KEYS[9]
--! include fence.lua
local refused = fence_refusal(ARGV[7])
if refused then return refused end
--! include topic_writes.lua
--! include delivery_limits.lua
--! include cancel_request.lua
local batch = tonumber(ARGV[1])
local first = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'batch', 'written')
local written = 0
if tonumber(state[1]) == batch then written = tonumber(state[2]) end
if written > first then return {written, 0, 0, 0, 0} end
if written < first then
  return redis.error_reply('DELAYLINE_MARKER batch ' .. batch .. ': chunk starts at row '
    .. first .. ' but only ' .. written .. ' rows are written')
end
local box = {KEYS[5], KEYS[6], KEYS[8]}
local d = topic_writes({journal_ttl = tonumber(ARGV[5]), rejects_key = KEYS[4], box = box,
  inbound_key = KEYS[7], horizon_ms = tonumber(ARGV[6])})
local counts = d.counts
local i = 8
for _ = 1, count do
  local kind = ARGV[i]
  if kind == 'r' then
    local n = tonumber(ARGV[i + 4])
    local fields = {}
    for j = 1, 2 * n do fields[j] = ARGV[i + 4 + j] end
    d.add_reject(fields, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
    i = i + 5 + 2 * n
  elseif kind == 'k' then
    request_cancel(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], '', tostring(d.now_ms),
      tonumber(ARGV[5]) * 1000)
    i = i + 4
  elseif kind == 'f' then
    pending_change(ARGV[i + 2], ARGV[i + 1], tonumber(ARGV[i + 3]), 0, 0)
    i = i + 4
  else
    local topic, id, body, key, headers, due, attempt, journal, cancels =
      unpack(ARGV, i + 1, i + 9)
    i = i + 10
    if kind == 'n' then
      counts.accepted = counts.accepted + 1
      pending_add(due, topic, 1)
      kind = 'd'
    elseif kind == 'm' then
      counts.accepted = counts.accepted + 1
      pending_change(due, topic, 0, 0, 1)
      kind = 'd'
    end
    if kind == 'x' then
      d.drop(topic, id, body, key, headers, due, attempt, journal, cancels)
    elseif kind == 'c' then
      d.inbound_send(id, topic, body, key, headers, due, attempt, true)
      counts.cascaded = counts.cascaded + 1
    elseif kind ~= 'd' then
      return redis.error_reply('DELAYLINE_ROW unknown row kind ' .. tostring(kind))
    elseif tonumber(due) > d.now_ms or topic_limit(topic) then
      -- (A due message of a limited topic goes through the pump, which applies it.)
      -- A message whose id already waits in the outbox is a duplicate: the first one wins.
      if not outbox_put(box, d.now_ms, id, topic, body, key, headers, due, attempt, journal,
          cancels) then
        counts.duplicates = counts.duplicates + 1
        pending_add(due, topic, -1)
      end
    elseif d.deliver_waiting(box[2], id) then
      -- Due as well (same id, same time): it goes now, ahead of the pump.
      redis.call('ZREM', box[1], id)
      redis.call('HDEL', box[2], id)
      counts.duplicates = counts.duplicates + 1
      pending_add(due, topic, -1)
    else
      d.deliver_or_drop(id, nil, topic, body, key, headers, due, attempt, journal, cancels)
    end
  end
end
redis.call('HSET', KEYS[1], 'batch', ARGV[1], 'written', first + count)
redis.call('EXPIRE', KEYS[1], ARGV[4])
d.flush_counts(KEYS[2], KEYS[3])
return {first + count, counts.delivered, counts.duplicates, counts.dropped, counts.rejected}
