-- Release a holder: KEYS name; ARGV owner, fence, channel -> 1 freed, 0 not ours. The key
-- goes with its last holder (unless a writer's mark keeps it); if a waiter flagged it and
-- the release may let one in (the last reader went, or a semaphore's permit came free),
-- PUBLISHes the name and clears the flag (a waiter still busy sets it again).

local v = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(v) ~= 'string' then return 0 end
local m, f, e = holder(v)
local now = clock()
if f ~= ARGV[2] or tonumber(e) <= now then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
local st = holders(KEYS[1], now, nil)
if st.waiting == '1' and (st.live == 0 or st.permits > 1) then
  redis.call('HDEL', KEYS[1], ':waiting')
  redis.call('PUBLISH', ARGV[3], KEYS[1])
end
expire(KEYS[1], st, now)
return 1
