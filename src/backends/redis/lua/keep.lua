-- A release that keeps the lock taken for ARGV[3] ms more (LockOptions::hold_at_least): the
-- same check as release, then holds 0 (kept: see acquire) and exactly that expiry.

local f, h, at, w, a, o = parse(get(KEYS[1]))
if o ~= ARGV[1] or f ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], record(f, '0', at, w, a, o), 'PX', ARGV[3])
return 1
