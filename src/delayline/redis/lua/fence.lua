-- A library, shared by the scheduler's shard scripts (write_chunk.lua, pump.lua,
-- settle_ready.lua): the fencing check (see redis/lease.py). ns, the shard's
-- namespace, is set by the including script before it.
-- fence_refusal(token) is an error reply if the shard's fence is above token (a
-- newer scheduler took the shard over: the caller must write nothing), else nil.
-- Token 0 (a caller without the lease: a test, a tool) passes only while the
-- shard has no fence, that is while no scheduler has taken the lease. A group's
-- lane is fenced with its shard.

--! include shard_ns.lua

local function fence_refusal(token)
  local fence = tonumber(redis.call('GET', shard_ns .. '${FENCE}') or '0')
  if (tonumber(token) or 0) < fence then
    return redis.error_reply('${FENCED} token ' .. tostring(token) .. ' is below the fence '
      .. fence .. ' of ' .. shard_ns .. ': another scheduler took over')
  end
  return nil
end
