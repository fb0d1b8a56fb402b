-- Redlock's fence write-back: raise the node's counter to the grant's fence F (so that the
-- next grant, whose majority overlaps this one, draws past F) and record F as the fence
-- of our hold there. Answers whether we hold the name on this node.

if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
local f, h, at, w, a, o = parse(get(KEYS[1]))
if o ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], record(ARGV[2], h, at, w, a, o), 'KEEPTTL')
return 1
