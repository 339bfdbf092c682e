-- Create a group, with its token's digest (see plans/grouping.py), unless one of
-- that name exists or the registry holds its most groups already.
--
-- KEYS: groups (hash: name -> stored group), tokens (hash: token digest -> name).
-- ARGV: name, stored group (JSON), token digest, most groups.
-- Returns 1 (created), 0 (the name is taken) or -1 (the registry is full).

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
return 1
