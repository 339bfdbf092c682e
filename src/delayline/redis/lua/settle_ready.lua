-- The last step of a sharded delivery (see topic_writes.lua), in the shard's slot:
-- count each ready entry that deliver_ready.lua wrote to its topic as
-- delivered, keep one its topic could not take as a reject, and take both off
-- the ready stream. An entry settled already (by another flusher) is skipped.
-- KEYS: ready stream, stats, lateness, rejects, namespace.
-- ARGV: journal ttl s, fencing token (fence.lua), then per entry: its ready entry id, '' or the error that
-- kept it out of its topic, and its deliver_at_ms and delivered_at_ms (the
-- flusher read them; only a reject's other fields are read here again).
-- Returns how many it settled.

local ns = KEYS[5]
--! include fence.lua
local refused = fence_refusal(ARGV[2])
if refused then return refused end
--! include topic_writes.lua
local d = topic_writes({journal_ttl = tonumber(ARGV[1]), rejects_key = KEYS[4]})
local settled = 0
for i = 3, #ARGV, 4 do
  local found = {}
  if ARGV[i + 1] ~= '' then found = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i]) end
  if redis.call('XDEL', KEYS[1], ARGV[i]) == 1 then
    if ARGV[i + 1] == '' then
      d.count_delivered(ARGV[i + 2], tonumber(ARGV[i + 3]))
    else
      local fields, f = found[1][2], {}
      for j = 1, #fields, 2 do f[fields[j]] = fields[j + 1] end
      d.reject_undelivered(f['topic'], f['id'], f['body'], f['key'], f['headers'],
        f['deliver_at_ms'], f['attempt'], ARGV[i + 1])
    end
    settled = settled + 1
  end
end
d.flush_counts(KEYS[2], KEYS[3])
return settled
