-- Schedule messages that are due soon: each straight into the outbox, or, if
-- Redis's clock says it is not due within the scheduler's horizon after all,
-- onto the inbound stream. ARGV[1] is the horizon as the producer last read it
-- from the scheduler's config (a stale one is safe: the pump delivers whatever
-- waits in the outbox, and the Spark path whatever does not). Each message comes as its
-- inbound record (the one encoding the SDK writes), so it is sent once, not
-- twice; one call takes many, since a call's own cost in Redis is as large as
-- a message's.
-- KEYS: outbox, outbox data, outbox bell, inbound, stats, namespace.
-- ARGV: horizon_ms, then per message: n, and its record's n fields and
-- values. Returns how many went to the outbox (or already wait there: an SDK
-- retry); the others went to the inbound stream.

local ns = KEYS[6]
--! include outbox.lua
--! include forecast.lua
--! include status_keys.lua
--! include horizon.lua
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local horizon_ms = tonumber(ARGV[1])
local box = {KEYS[1], KEYS[2], KEYS[3]}
local near, accepted = 0, 0
local i = 2
while i <= #ARGV do
  local last = i + 2 * tonumber(ARGV[i])
  local f = {}
  for j = i + 1, last, 2 do f[ARGV[j]] = ARGV[j + 1] end
  local due = f['deliver_at_ms']
  if not is_near(due, now_ms, horizon_ms) then
    redis.call('XADD', KEYS[4], '*', unpack(ARGV, i + 1, last))
  else
    near = near + 1
    if outbox_put(box, now_ms, f['id'], f['topic'], f['body'], f['key'] or '',
        f['headers'] or '{}', due, f['attempt'] or '1', journal_of(due), cancels_of(due)) then
      accepted = accepted + 1
      pending_add(due, f['topic'], 1)
    end
  end
  i = last + 1
end
if accepted > 0 then redis.call('HINCRBY', KEYS[5], 'accepted', accepted) end
pending_flush()
return near
