-- A holder's release that keeps its place for keep_ms more (LockOptions::hold_at_least):
-- KEYS name; ARGV owner, fence, keep_ms -> 1 kept (holds 0), 0 not ours.

local v = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(v) ~= 'string' then return 0 end
local m, f, e, h, at = holder(v)
local now = clock()
if f ~= ARGV[2] or tonumber(e) <= now then return 0 end
e = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], m .. ' ' .. f .. ' ' .. string.format('%d', e) .. ' 0 ' .. at)
expire(KEYS[1], holders(KEYS[1], now, nil), now)
return 1
