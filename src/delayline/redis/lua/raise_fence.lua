-- Raise a shard's fence to a scheduler's token, unless it stands higher already (see
-- redis/lease.py). From then on, the shard's scripts refuse calls with a lower token.
--
-- KEYS: fence.
-- ARGV: token.
-- Returns the fence after the call: the token, or the higher one that stood there.

local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token > fence then
  redis.call('SET', KEYS[1], token)
  return token
end
return fence
