-- Renew: only the holder of this very grant (owner and fence) may extend, so a stale grant
-- of the same owner never resurrects or prolongs a newer one. Like the SQL strategies it
-- keeps the longer of what is left and the new TTL (ttl 0: only the holds change), and
-- writes the owner's hold count (ARGV[4]) when it changed: the client keeps the count, the
-- record shows it. Fences and holds compare as decimal strings: both sides are canonical
-- (string.format('%d')'s, std::to_string's), and no float is involved.

local f, h, at, w, a, o = parse(get(KEYS[1]))
if o ~= ARGV[1] or f ~= ARGV[2] then return false end
local ttl = tonumber(ARGV[3])
local left = redis.call('PTTL', KEYS[1])
if h ~= ARGV[4] then
  if left < ttl then left = ttl end
  if left < 1 then left = 1 end
  redis.call('SET', KEYS[1], record(f, ARGV[4], at, w, a, o), 'PX', left)
  return left
end
if left >= ttl then return left end
redis.call('PEXPIRE', KEYS[1], ttl)
return ttl
