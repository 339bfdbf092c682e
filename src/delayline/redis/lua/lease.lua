-- Take, renew or give up the scheduler's lease (see redis/lease.py), atomically.
--
-- KEYS: lease, token counter.
-- ARGV: owner, ttl ms (0: give the lease up), the owner's token (0: none yet).
-- The lease holds "<token> <owner>" and expires after ttl ms unless renewed.
-- Held by the owner: renewed for ttl ms (deleted with ttl 0), with its token.
-- Held by another: left alone. Free, to an owner without a token: taken with a
-- new one (the counter, plus one). Free, to an owner with a token (its renewals
-- lapsed, say while Redis was away): taken back with it only if nobody took the
-- lease since (the counter is still that token).
-- Returns the owner's token, or 0 if it does not hold the lease now (or, to give
-- it up, did not hold it).

local held = redis.call('GET', KEYS[1])
local ttl_ms = tonumber(ARGV[2])
local mine = tonumber(ARGV[3])
if held then
  local space = string.find(held, ' ', 1, true)
  if string.sub(held, space + 1) ~= ARGV[1] then return 0 end
  if ttl_ms == 0 then
    redis.call('DEL', KEYS[1])
  else
    redis.call('PEXPIRE', KEYS[1], ttl_ms)
  end
  return tonumber(string.sub(held, 1, space - 1))
end
if ttl_ms == 0 then return 0 end
local token = mine
if mine == 0 then
  token = redis.call('INCR', KEYS[2])
elseif tonumber(redis.call('GET', KEYS[2]) or '0') ~= mine then
  return 0
end
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'PX', ttl_ms)
return token
