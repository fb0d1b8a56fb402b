-- A fair waiter that gives up (its acquire timed out or threw) leaves the queue: KEYS name,
-- queue, alive, fence; ARGV owner, channel -> 1 if it had a place. If the name is free, it
-- is passed on (the waiter now first may have been waiting for us to take our turn); if it
-- is ours (handed over as we gave up, or a grant whose answer was lost), it is freed and
-- passed on: the acquire ends without a lease, so nobody would use it.

local had = leave(KEYS[2], KEYS[3], ARGV[1])
local v = redis.pcall('GET', KEYS[1])
local f, h, at, w, a, o = parse(type(v) == 'string' and v or nil)
if o == ARGV[1] and h ~= '0' then
  redis.call('DEL', KEYS[1])
  pass_on(KEYS[1], KEYS[4], KEYS[2], KEYS[3], ARGV[2])
  return 1
end
if not had then return 0 end
if not v then pass_on(KEYS[1], KEYS[4], KEYS[2], KEYS[3], ARGV[2]) end
return 1
