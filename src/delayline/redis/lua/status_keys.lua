-- A library: the names of a message's status hashes in its shard, by its due
-- ms, as keys.ShardKeys names them (journal, rejected, cancel_requests). ns, the
-- shard's namespace, is set by the including script.
local function bucket_key(family, due, bucket_ms)
  return ns .. family .. string.format('%d', math.floor(tonumber(due) / bucket_ms))
end
local function journal_of(due) return bucket_key('${JOURNAL}', due, ${JOURNAL_BUCKET_MS}) end
local function rejected_of(due) return bucket_key('${REJECTED}', due, ${JOURNAL_BUCKET_MS}) end
local function cancels_of(due) return bucket_key('${CANCELS}', due, ${CANCELS_BUCKET_MS}) end
