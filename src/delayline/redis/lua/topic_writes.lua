-- A library, shared by write_chunk.lua, pump.lua, reschedule.lua and
-- settle_ready.lua: the clock, the journal, delivery, drops and reschedules,
-- rejects, and counters. topic_writes(ctx) starts a call's deliveries and returns
-- them as a table; ctx holds what they take from the including script:
--   journal_ttl  the status records' ttl (s; 0: none are kept)
--   rejects_key  the shard's rejects stream
--   box          {outbox, outbox data, bell} (lua/outbox.lua)
--   inbound_key  the inbound stream in the shard's slot
--   horizon_ms   the scheduler's horizon, for a reschedule's new message
-- (settle_ready.lua, which delivers nothing, gives the first two). ns, the
-- shard's namespace (the script's last key), is set by the including script
-- before it, as for every library that names the shard's keys.
--
-- A shard of a sharded layout (ns holds its Redis Cluster hash tag, '{') delivers
-- in two steps, so that each script touches one Redis Cluster slot: here a due message is
-- journalled and appended to the shard's ready stream (ready_key), as the
-- topic entry it becomes plus its topic; deliver_ready.lua writes it to the
-- topic, in the topic's slot, and settle_ready.lua counts it and takes it off.
-- A shard whose topics are outside Redis (its target key names them, as
-- "kafka:<brokers>") delivers the same way, with the pump writing to them and
-- rung here for every message readied.

--! include outbox.lua
--! include shard_ns.lua
--! include forecast.lua
--! include status_keys.lua
--! include horizon.lua
local function topic_writes(ctx)
  local journal_ttl, rejects_key, box = ctx.journal_ttl, ctx.rejects_key, ctx.box
  local inbound_key, horizon_ms = ctx.inbound_key, ctx.horizon_ms
  local d = {}
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local now = string.format('%d', now_ms)
  local bounds = {${LATENESS_BUCKETS_MS}}
  local counts = {delivered = 0, duplicates = 0, dropped = 0, rejected = 0, cascaded = 0,
    accepted = 0}
  local late_counts, late_sum = {}, 0
  local expiring = {}
  -- The journal entries of ids looked up ahead (d.look_up_journal): whether each
  -- is there (true) or not (false); an id not looked up is nil. Entries for them
  -- are written in one HSET a journal when the call ends (flush_journal), not one
  -- HSETNX each: the pump journals a thousand messages a call.
  local journalled, unwritten = {}, {}
  local function look_up_journal(journal, ids)
    if journal_ttl <= 0 or #ids == 0 then return end
    local known = journalled[journal] or {}
    journalled[journal] = known
    local found = redis.call('HMGET', journal, unpack(ids))
    for i, id in ipairs(ids) do known[id] = found[i] ~= false end
  end
  local function journal_put(journal, id, value)
    if journal_ttl <= 0 then return 1 end
    local known = journalled[journal]
    if known and known[id] ~= nil then
      if known[id] then return 0 end
      known[id] = true
      local pending = unwritten[journal] or {}
      unwritten[journal] = pending
      pending[id] = value
      return 1
    end
    local fresh = redis.call('HSETNX', journal, id, value)
    if fresh == 1 and not expiring[journal] then
      expiring[journal] = true
      redis.call('EXPIRE', journal, journal_ttl)
    end
    return fresh
  end
  -- Take back an entry journal_put made: the message was not delivered.
  local function journal_take_back(journal, id)
    local pending = unwritten[journal]
    if pending and pending[id] then
      pending[id] = nil
      journalled[journal][id] = false
    else
      redis.call('HDEL', journal, id)
    end
  end
  local function flush_journal()
    for journal, pending in pairs(unwritten) do
      local args = {}
      for id, value in pairs(pending) do
        args[#args + 1] = id
        args[#args + 1] = value
        -- unpack's stack is limited: a thousand fields at most a call.
        if #args == 2000 then
          redis.call('HSET', journal, unpack(args))
          args = {}
        end
      end
      if #args > 0 then redis.call('HSET', journal, unpack(args)) end
      redis.call('EXPIRE', journal, journal_ttl)
    end
    unwritten = {}
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
  local ready_key = ''
  local outside = redis.call('EXISTS', shard_ns .. '${TARGET}') == 1
  if outside or string.find(ns, '{', 1, true) then ready_key = ns .. '${READY}' end
  local readied = false
  -- Every topic stream written is recorded once a call, for its retention
  -- (lua/trim_topic.lua); a topic outside Redis has its own.
  local registered = {}
  local function register(topic)
    if outside or registered[topic] then return end
    registered[topic] = true
    redis.call('SADD', shard_ns .. '${TOPICS}', topic)
  end
  -- A call's messages are mostly due at the same ms: the last bucket is kept.
  local last_late, last_label = nil, nil
  local function count_delivered(due, delivered_at_ms)
    counts.delivered = counts.delivered + 1
    local late = delivered_at_ms - tonumber(due)
    late_sum = late_sum + late
    if late ~= last_late then
      last_late, last_label = late, '+Inf'
      for _, bound in ipairs(bounds) do
        if late <= bound then last_label = tostring(bound) break end
      end
    end
    late_counts[last_label] = (late_counts[last_label] or 0) + 1
  end
  -- The topic key holds another type (WRONGTYPE), or cannot take an entry:
  -- raising would fail the chunk on every retry, for good. Keep the message as a
  -- reject, and take back its journal entry: it was not delivered.
  local function reject_undelivered(topic, id, body, key, headers, due, attempt, err)
    if journal_ttl > 0 then journal_take_back(journal_of(due), id) end
    local reason = 'cannot deliver to topic ' .. topic .. ': ' .. err
    add_reject({'id', id, 'topic', topic, 'body', body, 'key', key, 'headers', headers,
      'deliver_at_ms', due, 'attempt', attempt, 'reason', reason, 'rejected_at_ms', now},
      rejected_of(due), id, reason)
  end
  -- The topic entry: the one place its fields are listed (a ready entry adds its
  -- topic's after them). Its values are passed as they are, not through a table:
  -- the pump adds a thousand a call.
  local function add_entry(call, stream, id, body, key, headers, due, attempt, ...)
    return call('XADD', stream, '*', 'id', id, 'body', body, 'key', key, 'headers', headers,
      'deliver_at_ms', due, 'delivered_at_ms', now, 'attempt', attempt, ...)
  end
  -- counted: the ms the forecast counts the message at, if not its due time (a
  -- message its delivery limit held is counted at the time it was held until).
  local function deliver(topic, id, body, key, headers, due, attempt, journal, counted)
    -- However it ends (delivered, a duplicate, a reject), it is no longer pending.
    pending_add(counted or due, topic, -1)
    if journal_put(journal, id, now) ~= 1 then
      counts.duplicates = counts.duplicates + 1
      return
    end
    register(topic)
    if ready_key ~= '' then
      add_entry(redis.call, ready_key, id, body, key, headers, due, attempt, 'topic', topic)
      readied = outside
      return
    end
    local added = add_entry(redis.pcall, topic, id, body, key, headers, due, attempt)
    if type(added) == 'table' and added.err then
      reject_undelivered(topic, id, body, key, headers, due, attempt, added.err)
      return
    end
    count_delivered(due, now_ms)
  end
  -- A minute's cancel requests are rare: whether its hash exists is asked once
  -- per call, and only an existing one is searched for each id.
  local cancel_hashes = {}
  local function cancel_requested(cancels, id)
    if cancel_hashes[cancels] == nil then
      cancel_hashes[cancels] = redis.call('EXISTS', cancels) == 1
    end
    return cancel_hashes[cancels] and redis.call('HEXISTS', cancels, id) == 1
  end
  -- Append a send to the inbound stream, as the v1 record the SDK writes; a
  -- cascade (a message handed down from a coarse slot) is marked, so that the
  -- source does not count it as accepted twice.
  local function inbound_send(id, topic, body, key, headers, due, attempt, cascade)
    local record = {'v', '1', 'op', 'send', 'id', id, 'topic', topic, 'body', body,
      'headers', headers, 'deliver_at_ms', due, 'attempt', attempt}
    if key ~= '' then
      record[#record + 1] = 'key'
      record[#record + 1] = key
    end
    if cascade then
      record[#record + 1] = '${CASCADE}'
      record[#record + 1] = '1'
    end
    redis.call('XADD', inbound_key, '*', unpack(record))
  end
  -- Schedule a reschedule's new message: into the outbox if due within the
  -- scheduler's horizon, or else onto the inbound stream, as the near path does.
  d.placed_in_outbox = false
  local function place(id, topic, body, key, headers, due, attempt, via_inbound)
    if via_inbound or not is_near(due, now_ms, horizon_ms) then
      inbound_send(id, topic, body, key, headers, due, attempt, false)
      return
    end
    if outbox_put(box, now_ms, id, topic, body, key, headers, due, attempt,
        journal_of(due), cancels_of(due)) then
      counts.accepted = counts.accepted + 1
      pending_add(due, topic, 1)
      d.placed_in_outbox = true
    end
  end
  -- Drop a message that a cancel named; a copy dropped already is a duplicate.
  -- A reschedule's request ("<ms>:<new id>:<new due ms>") sends the message
  -- again, as the new id: only here, where it is dropped, is its body at hand.
  -- A request that a change of the shard count copied here ends in ${VIA_INBOUND} if the
  -- new id is of another shard now: it goes through the inbound stream, which
  -- routes it there (see redis/layout.py).
  local function drop(topic, id, body, key, headers, due, attempt, journal, cancels, counted)
    local _, new_id, new_due, via = string.match(redis.call('HGET', cancels, id) or '',
      '^([^:]*):([^:]+):(%d+)(.*)$')
    local mark = new_id and ('${RESCHEDULED}' .. new_id) or '${CANCELLED}'
    if journal_put(journal, id, mark) ~= 1 then
      counts.duplicates = counts.duplicates + 1
      pending_add(counted or due, topic, -1)
      return
    end
    counts.dropped = counts.dropped + 1
    pending_drop(due, topic, id, cancels, counted)
    if new_id then
      place(new_id, topic, body, key, headers, new_due, attempt, via == '${VIA_INBOUND}')
    end
  end
  -- Deliver a due message, or drop it if a cancel was requested for it meanwhile
  -- (by Client.cancel, or a raw cancel the source recorded): a cancel that comes
  -- after its slot fired still wins, as long as the message has not gone out.
  -- counted: as for deliver (nil: its due time).
  local function deliver_or_drop(id, counted, topic, body, key, headers, due, attempt, journal,
      cancels)
    if cancel_requested(cancels, id) then
      drop(topic, id, body, key, headers, due, attempt, journal, cancels, counted)
    else
      deliver(topic, id, body, key, headers, due, attempt, journal, counted)
    end
  end
  -- The ms the forecast counts an outbox entry of score at: the score, rounded up
  -- (a held entry's has a fraction: lua/pump.lua).
  local function counted_at(score) return score and math.ceil(tonumber(score)) end
  -- Deliver (or drop) the message waiting under id in the outbox data hash; the
  -- caller removes it from the outbox. False if none waits.
  local function deliver_waiting(outbox_data, id)
    local packed = redis.call('HGET', outbox_data, id)
    if not packed then return false end
    local counted = counted_at(redis.call('ZSCORE', box[1], id))
    deliver_or_drop(id, counted, outbox_decode(id, packed))
    return true
  end
  local function flush_counts(stats, lateness)
    flush_journal()
    if counts.rejected > 0 then
      -- The rejects stream keeps the newest ${REJECTS_MAX_LEN} or so; what goes is counted.
      counts.rejects_trimmed = redis.call('XTRIM', rejects_key, 'MAXLEN', '~', ${REJECTS_MAX_LEN})
    end
    for name, value in pairs(counts) do
      if value > 0 then redis.call('HINCRBY', stats, name, value) end
    end
    for label, value in pairs(late_counts) do redis.call('HINCRBY', lateness, label, value) end
    if counts.delivered > 0 then
      redis.call('HINCRBY', lateness, '${SUM_FIELD}', late_sum)
    end
    if readied then
      redis.call('LPUSH', box[3], 1)
      redis.call('LTRIM', box[3], 0, 0)
    end
    pending_flush()
    -- The minute's history (delayline/history.py), by Redis's clock: its counts and
    -- its deliveries' lateness, kept ${HISTORY_TTL_S} s past the minute's end.
    local minute = math.floor(now_ms / 60000)
    local history = ns .. '${HISTORY}' .. minute
    local wrote = false
    for _, name in ipairs({${HISTORY_COUNTED}}) do
      if counts[name] > 0 then
        redis.call('HINCRBY', history, name, counts[name])
        wrote = true
      end
    end
    for label, value in pairs(late_counts) do
      redis.call('HINCRBY', history, '${HISTORY_LATENESS}' .. label, value)
    end
    if counts.delivered > 0 then
      redis.call('HINCRBY', history, '${HISTORY_LATENESS}${SUM_FIELD}', late_sum)
    end
    if wrote then redis.call('EXPIREAT', history, (minute + 1) * 60 + ${HISTORY_TTL_S}) end
  end
  -- The µs past now_ms, for a caller that times its next call to the µs.
  d.now_ms, d.now, d.now_us_past = now_ms, now, tonumber(t[2]) % 1000
  d.counts, d.ready_key = counts, ready_key
  d.add_reject, d.count_delivered, d.reject_undelivered = add_reject, count_delivered,
    reject_undelivered
  d.inbound_send, d.drop, d.deliver_or_drop = inbound_send, drop, deliver_or_drop
  d.deliver_waiting, d.flush_counts = deliver_waiting, flush_counts
  d.cancel_requested, d.counted_at = cancel_requested, counted_at
  d.look_up_journal = look_up_journal
  return d
end
