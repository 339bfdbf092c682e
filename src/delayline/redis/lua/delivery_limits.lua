-- A library: topics' delivery limits (delayline/limits.py), which the pump
-- applies. <ns>${LIMITS} maps a limited topic to its limit (JSON, with the shard's
-- share of the rate and the spread in ms). hold_until(id, topic, due_ms, now_ms)
-- says whether a due message goes now (nil) or is held until a later ms:
--   spread  a stable pseudo-random 0 to spread ms past its due time, from its id;
--   rate    the first free slot from then on: a second holds rate slots, spaced
--           evenly, and <ns>${RATE_SLOTS}<topic>:<second> counts those taken (or
--           passed unused before a message came).
-- A held message is never early: it is held until a time after its due time.
-- Slots are taken in the order the pump reaches messages, earliest due first.
-- <ns>${RATE_SLOTS}<topic> keeps the first second not known to be full, so that a
-- backlog is not scanned again for each message. Counters and that cursor expire
-- ${RATE_SLOTS_TTL_S} s past their second. ns is set by the including script.
-- A topic without a limit of its own takes its group's (the field '${GROUP_WIDE}'),
-- whose rate slots all its topics share (they are counted under '${GROUP_WIDE}').
local limit_cache, group_limit = {}, nil
local slots_taken, slots_added, slot_cursor, cursor_read = {}, {}, {}, {}
local function decoded_limit(stored, slots)
  if not stored then return false end
  local fields = cjson.decode(stored)
  local rate, spread = tonumber(fields['${SHARD_RATE_FIELD}']) or 0,
    tonumber(fields['${SPREAD_FIELD}']) or 0
  if rate > 0 or spread > 0 then return {rate = rate, spread = spread, slots = slots} end
  return false
end
-- One HMGET a topic a call reads the topic's limit and its group's.
local function topic_limit(topic)
  local limit = limit_cache[topic]
  if limit == nil then
    local stored = redis.call('HMGET', ns .. '${LIMITS}', topic, '${GROUP_WIDE}')
    if group_limit == nil then group_limit = decoded_limit(stored[2], '${GROUP_WIDE}') end
    limit = decoded_limit(stored[1], topic) or group_limit
    limit_cache[topic] = limit
  end
  return limit
end
local function slots_prefix(topic) return ns .. '${RATE_SLOTS}' .. topic end
local function slots_key(topic, second)
  return slots_prefix(topic) .. ':' .. string.format('%d', second)
end
local function taken(key)
  local n = slots_taken[key]
  if n == nil then
    n = tonumber(redis.call('GET', key) or '0')
    slots_taken[key] = n
  end
  return n
end
-- The first ms at or after from_ms with one of rate slots a second free; takes it.
local function take_slot(topic, rate, from_ms)
  local second = math.floor(from_ms / 1000)
  local cursor = slot_cursor[topic]
  if cursor == nil then
    cursor = tonumber(redis.call('GET', slots_prefix(topic)) or '0')
    slot_cursor[topic], cursor_read[topic] = cursor, cursor
  end
  -- Only a scan from the cursor on knows that every second it passes is full.
  local contiguous = second <= cursor
  if second < cursor then second = cursor end
  while true do
    local key = slots_key(topic, second)
    local n = taken(key)
    -- The slots of a second that passed before from_ms are lost, not spent at once:
    -- a herd starts at the rate, not with a burst of the second's unused slots.
    local lost = math.ceil((from_ms - second * 1000) * rate / 1000)
    if n < lost then n = lost end
    if n < rate then
      slots_taken[key] = n + 1
      slots_added[key] = second
      local at = second * 1000 + math.floor(n * 1000 / rate)
      if at < from_ms then at = from_ms end
      return at
    end
    second = second + 1
    if contiguous then slot_cursor[topic] = second end
  end
end
local function hold_until(id, topic, due_ms, now_ms)
  local limit = topic_limit(topic)
  if not limit then return nil end
  local from_ms = due_ms
  if limit.spread > 0 then
    from_ms = from_ms + tonumber(string.sub(redis.sha1hex(id), 1, 8), 16) % (limit.spread + 1)
  end
  if from_ms < now_ms then from_ms = now_ms end
  if limit.rate > 0 then from_ms = take_slot(limit.slots, limit.rate, from_ms) end
  if from_ms <= now_ms then return nil end
  return from_ms
end
local function flush_slots()
  for key, second in pairs(slots_added) do
    redis.call('SET', key, slots_taken[key], 'EXAT', second + ${RATE_SLOTS_TTL_S})
  end
  for topic, cursor in pairs(slot_cursor) do
    if cursor ~= cursor_read[topic] then
      redis.call('SET', slots_prefix(topic), cursor, 'EXAT', cursor + ${RATE_SLOTS_TTL_S})
    end
  end
end
