-- Move up to ARGV[1] due messages from the outbox to their topics, atomically.
-- More than that due (a herd due at one ms, or a backlog) is split evenly over
-- the calls it needs, not cut at ARGV[1]: a call's messages become readable when
-- it ends and the next call starts after it, so 1,030 due at once go as 515 and
-- 515 rather than 1,000 and 30: the first half is readable in half the time and
-- nothing later, with no more calls.
--
-- A message whose id the SDK recorded a cancel for meanwhile is dropped instead;
-- one whose topic key is not a stream becomes a reject.
-- A reschedule's message is dropped and sent again under its new id.
-- A message of a topic with a delivery limit may be held instead
-- (lua/delivery_limits.lua): put back at the ms it may go, less half a ms. Such
-- a score (with a fraction) marks a message held already, which goes when due.
-- KEYS: outbox, outbox data, stats, lateness, rejects, outbox bell, inbound, namespace.
-- ARGV: max messages, journal ttl s, horizon ms, fencing token (fence.lua).
-- Returns {moved or held, now_ms, next due ms or -1 (perhaps with a fraction: round
-- it up), entries in the shard's ready stream, µs past now_ms, messages due by the
-- next due ms (0 if none): so that the pump wakes on the µs, with as many calls as
-- they need in one round trip}.

local ns = KEYS[8]
--! include fence.lua
local refused = fence_refusal(ARGV[4])
if refused then return refused end
--! include topic_writes.lua
--! include delivery_limits.lua
local d = topic_writes({journal_ttl = tonumber(ARGV[2]), rejects_key = KEYS[5],
  box = {KEYS[1], KEYS[2], KEYS[6]}, inbound_key = KEYS[7], horizon_ms = tonumber(ARGV[3])})
local waiting = redis.call('ZCOUNT', KEYS[1], '-inf', d.now)
local most = math.ceil(waiting / math.max(1, math.ceil(waiting / tonumber(ARGV[1]))))
local taken = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', d.now, 'WITHSCORES', 'LIMIT', 0, most)
-- Everything a message needs is read in one command per kind, not one per
-- message: the entries, and whether each is journalled already (its journal is
-- the one its due time names, as for almost every entry; journal_put asks for
-- the rest itself).
-- A call's messages mostly share their due ms, and so its journal key: worked
-- out once for each run of equal scores.
local due_ids, by_journal = {}, {}
local last_score, journal
for i = 1, #taken, 2 do
  local id = taken[i]
  if taken[i + 1] ~= last_score then
    last_score = taken[i + 1]
    journal = journal_of(last_score)
  end
  due_ids[(i + 1) / 2] = id
  local ids = by_journal[journal] or {}
  by_journal[journal] = ids
  ids[#ids + 1] = id
end
for journal, ids in pairs(by_journal) do d.look_up_journal(journal, ids) end
local entries = #due_ids > 0 and redis.call('HMGET', KEYS[2], unpack(due_ids)) or {}
-- held: score, id, ... to put back; gone: the ids whose entries go.
local held, gone, gone_n = {}, {}, 0
-- The forecast counts a held message at the time it is held until.
local function deliver_or_hold(id, score, topic, body, key, headers, due, attempt, journal, cancels)
  if score == math.floor(score) and topic_limit(topic) and not d.cancel_requested(cancels, id) then
    local until_ms = hold_until(id, topic, score, d.now_ms)
    if until_ms then
      held[#held + 1] = until_ms - 0.5
      held[#held + 1] = id
      pending_add(score, topic, -1)
      pending_add(until_ms, topic, 1)
      return
    end
  end
  gone_n = gone_n + 1
  gone[gone_n] = id
  d.deliver_or_drop(id, d.counted_at(score), topic, body, key, headers, due, attempt, journal,
    cancels)
end
for i, id in ipairs(due_ids) do
  if entries[i] then
    deliver_or_hold(id, tonumber(taken[2 * i]), outbox_decode(id, entries[i]))
  else
    gone_n = gone_n + 1
    gone[gone_n] = id
  end
end
if d.placed_in_outbox then
  -- A reschedule put its new message among them: remove the due ids one by one.
  redis.call('ZREM', KEYS[1], unpack(due_ids))
elseif #due_ids > 0 then
  -- The due ids are the outbox's lowest ranks: removing the range is cheaper
  -- than looking each one up again.
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #due_ids - 1)
end
if gone_n > 0 then redis.call('HDEL', KEYS[2], unpack(gone)) end
if #held > 0 then redis.call('ZADD', KEYS[1], unpack(held)) end
flush_slots()
d.flush_counts(KEYS[3], KEYS[4])
local next_due = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local due_by_next = 0
if next_due[2] then due_by_next = redis.call('ZCOUNT', KEYS[1], '-inf', next_due[2]) end
local ready = 0
if d.ready_key ~= '' then ready = redis.call('XLEN', d.ready_key) end
return {#due_ids, d.now, next_due[2] or '-1', ready, d.now_us_past, due_by_next}
