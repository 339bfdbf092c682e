-- A library: the forecast's counters, changed in the same atomic step as the
-- stats counters by every script that accepts or settles a message, so that
-- each message is counted once (their reader: plans/observing.py's forecast,
-- with delayline/forecast.py).
--
-- Per due minute, <ns>${FORECAST}<minute> holds '${FORECAST_TOPIC}<topic>' -> messages pending
-- and '${FORECAST_UNKNOWN}' -> cancels not yet applied whose topic is unknown (a cancel by id
-- does not name it); <ns>${FORECAST}<minute>:s holds <second of the minute> ->
-- messages pending, cancels subtracted. <ns>${FORECAST_INDEX} (sorted set) lists
-- the minutes. ns is the shard's namespace, set by the including script; a
-- reader adds up every shard's counters. A cancel is subtracted when it is
-- requested; the ${FORECAST_TAKEN}<id> field of its cancel-requests hash
-- remembers it until the message is dropped, so that the drop does not
-- subtract it twice.
local pending_deltas = {}
local pending_minutes = {}
local pending_last_second, pending_keys = nil, nil
-- Each topic's field name, made once a call: the pump counts a thousand messages.
local pending_topic_fields = {}
local function pending_change(due, topic, d_topic, d_unknown, d_second)
  local second = math.floor(tonumber(due) / 1000)
  if second ~= pending_last_second then
    local minute = math.floor(second / 60)
    local key = ns .. '${FORECAST}' .. string.format('%d', minute)
    pending_minutes[minute] = key
    pending_last_second = second
    pending_keys = {key, key .. '${FORECAST_SECONDS}', tostring(second % 60)}
  end
  local k = pending_keys
  local fields = pending_deltas[k[1]]
  if not fields then
    fields = {}
    pending_deltas[k[1]] = fields
  end
  local seconds = pending_deltas[k[2]]
  if not seconds then
    seconds = {}
    pending_deltas[k[2]] = seconds
  end
  if d_topic ~= 0 then
    local name = pending_topic_fields[topic]
    if not name then
      name = '${FORECAST_TOPIC}' .. topic
      pending_topic_fields[topic] = name
    end
    fields[name] = (fields[name] or 0) + d_topic
  end
  if d_unknown ~= 0 then fields['${FORECAST_UNKNOWN}'] = (fields['${FORECAST_UNKNOWN}'] or 0) + d_unknown end
  if d_second ~= 0 then seconds[k[3]] = (seconds[k[3]] or 0) + d_second end
end
-- A message accepted (+1) or settled (-1): delivered, dropped, a duplicate, or a reject.
local function pending_add(due, topic, delta)
  pending_change(due, topic, delta, 0, delta)
end
-- A message dropped by a cancel: subtracted already if the cancel was
-- (its ${FORECAST_TAKEN}<id> marker says so, and the topic it was subtracted under).
-- counted: the ms the message was counted at, if not its due time (held by its
-- topic's delivery limit); a cancel subtracts at the due time, so that is put
-- right here.
local function pending_drop(due, topic, id, cancels, counted)
  local marker = redis.call('HGET', cancels, '${FORECAST_TAKEN}' .. id)
  if not marker then
    pending_add(counted or due, topic, -1)
    return
  end
  redis.call('HDEL', cancels, '${FORECAST_TAKEN}' .. id)
  if marker == '' then pending_change(due, topic, -1, -1, 0) end
  if counted and counted ~= tonumber(due) then
    pending_add(due, topic, 1)
    pending_add(counted, topic, -1)
  end
end
-- Each minute's counters outlive its end by ${FORECAST_TTL_S} s: an overdue
-- minute (a scheduler that was down) stays visible, a forgotten one goes.
local function pending_flush()
  for key, fields in pairs(pending_deltas) do
    for field, delta in pairs(fields) do
      if delta ~= 0 then redis.call('HINCRBY', key, field, delta) end
    end
  end
  for minute, key in pairs(pending_minutes) do
    local expire_at = (minute + 1) * 60 + ${FORECAST_TTL_S}
    redis.call('EXPIREAT', key, expire_at)
    redis.call('EXPIREAT', key .. '${FORECAST_SECONDS}', expire_at)
    redis.call('ZADD', ns .. '${FORECAST_INDEX}', minute, minute)
  end
end
