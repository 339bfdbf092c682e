-- Take n sends of a group's rate quota in the current second, unless that passes
-- its bound (see plans/quotas.py): the count stays as it was then.
--
-- KEYS: the group's send counter of this second.
-- ARGV: n, the most sends a second, the counter's ttl s.
-- Returns {1 (taken) or 0 (refused), the count after the call}.

local taken = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[1])
if taken + n > tonumber(ARGV[2]) then return {0, taken} end
redis.call('INCRBY', KEYS[1], n)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {1, taken + n}
