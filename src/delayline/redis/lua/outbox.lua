-- A library: the outbox's one encoding, written and read only through these
-- functions. Format 1 packs {1, topic, body, key, headers, deliver_at_ms, attempt,
-- journal key, cancel-requests key}; an entry without the leading format number
-- predates it. box is {outbox, outbox data, bell}: the keys, as the script was
-- given them. An entry due within ${BELL_WITHIN_MS} ms rings the pump's bell.

local function outbox_put(box, now_ms, id, topic, body, key, headers, due, attempt, journal,
    cancels)
  local packed = cmsgpack.pack(1, topic, body, key, headers, due, attempt, journal, cancels)
  if redis.call('HSETNX', box[2], id, packed) == 0 then return false end
  redis.call('ZADD', box[1], due, id)
  if tonumber(due) - now_ms < ${BELL_WITHIN_MS} then
    redis.call('LPUSH', box[3], 1)
    redis.call('LTRIM', box[3], 0, 0)
  end
  return true
end
local function outbox_fields(id, first, ...)
  if type(first) ~= 'number' then return first, ... end
  if first ~= 1 then
    error({err = 'DELAYLINE_OUTBOX entry ' .. id .. ' has format ' .. first
      .. ', newer than this delayline reads'})
  end
  return ...
end
-- An entry's fields, as values (topic, body, key, headers, due, attempt, journal,
-- cancels): the pump decodes a thousand a call, and a table each would cost.
local function outbox_decode(id, packed) return outbox_fields(id, cmsgpack.unpack(packed)) end
local function outbox_get(outbox_data, id)
  local data = redis.call('HGET', outbox_data, id)
  if not data then return nil end
  return {outbox_decode(id, data)}
end
