-- A library: the one rule for near or far, delayline.timing.is_near's (a test
-- holds the two together): a message due at due_ms is near at now_ms, to go
-- straight into the outbox, iff due_ms - now_ms <= horizon_ms (all ms).
local function is_near(due_ms, now_ms, horizon_ms)
  return tonumber(due_ms) - now_ms <= horizon_ms
end
