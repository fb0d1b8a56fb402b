-- Renew a holder: KEYS name; ARGV owner, fence, ttl_ms, holds -> remaining_ms, or nil when
-- not ours (no such holder with that fence, or it expired). Keeps the longer of what is left
-- and ttl (ttl 0: only the holds change), as the exclusive renewal does.

local v = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(v) ~= 'string' then return false end
local m, f, e, h, at = holder(v)
local now = clock()
if f ~= ARGV[2] or tonumber(e) <= now then return false end
e = tonumber(e)
if now + tonumber(ARGV[3]) > e then e = now + tonumber(ARGV[3]) end
redis.call('HSET', KEYS[1], ARGV[1], m .. ' ' .. f .. ' ' .. string.format('%d', e) .. ' ' .. ARGV[4] .. ' ' .. at)
if redis.call('PTTL', KEYS[1]) < e - now then redis.call('PEXPIRE', KEYS[1], e - now) end
return e - now
