-- Reschedule a message: it is never delivered, and a copy of it is, once, as a
-- new id at a new time. If it waits in the outbox, that happens here. If not,
-- it is in the scheduler's state (or on its way there): the request recorded
-- here and the reschedule record appended to the inbound stream make the
-- scheduler withdraw it, and whoever drops it then sends the copy (see drop()
-- in topic_writes.lua). Until then it leaves the forecast, as for a cancel.
-- KEYS: outbox, outbox data, outbox bell, inbound, stats, lateness, rejects, namespace.
-- ARGV: retention past the due minute ms, journal ttl s, id, its deliver_at_ms,
-- new id, its deliver_at_ms, horizon ms, then the reschedule record: n, and n
-- fields and values.
-- Returns {'rescheduled', ''}; {'settled', journal value} if the message was
-- delivered, cancelled or rescheduled already; {'requested', request} if a
-- cancel or reschedule was requested for it already.

local ns = KEYS[8]
--! include topic_writes.lua
--! include cancel_request.lua
local d = topic_writes({journal_ttl = tonumber(ARGV[2]), rejects_key = KEYS[7],
  box = {KEYS[1], KEYS[2], KEYS[3]}, inbound_key = KEYS[4], horizon_ms = tonumber(ARGV[7])})
local id, due, new_id, new_due = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local settled = redis.call('HGET', journal_of(due), id)
if settled then return {'settled', settled} end
local requested = redis.call('HGET', cancels_of(due), id)
if requested then return {'requested', requested} end
request_cancel(id, due, '', new_id .. ':' .. new_due, d.now, tonumber(ARGV[1]))
if d.deliver_waiting(KEYS[2], id) then
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
else
  redis.call('XADD', KEYS[4], '*', unpack(ARGV, 9, 8 + 2 * tonumber(ARGV[8])))
end
d.flush_counts(KEYS[5], KEYS[6])
return {'rescheduled', ''}
