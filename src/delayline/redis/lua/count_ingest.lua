-- Add one batch's ingest counts once, however often the batch is replayed.
-- KEYS: ingest marker, stats, namespace (of both). ARGV: batch, accepted, cancels, marker ttl seconds,
-- then for the forecast, per (due second, topic) of the accepted sends:
-- a due time in that second (ms), the topic, and how many.
-- Returns 1 if it added them, 0 if this batch's were added already.

local ns = KEYS[3]
--! include forecast.lua
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
local batch = tonumber(ARGV[1])
if batch <= last then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[4])
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', KEYS[2], 'accepted', ARGV[2]) end
if tonumber(ARGV[3]) > 0 then redis.call('HINCRBY', KEYS[2], 'cancels', ARGV[3]) end
for i = 5, #ARGV, 3 do pending_add(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])) end
pending_flush()
return 1
