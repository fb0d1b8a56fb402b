-- A name's queue of fair waiters (redis strategy, exclusive; see acquire.lua): KEYS q, a
-- = keys::queue, keys::alive. head(q, a, now, me) -> the oldest live ticket's owner, until
-- when it holds, the lease it takes as a hand-over (nil: none) and whether another ticket is
-- behind it (nil when none), removing lapsed tickets found in front of it (the asker's own,
-- `me`, is live: it is asking); join(...) takes a place at the back or keeps ours, valid
-- for `life` ms more, taking hand-overs as `lease` says ("LEASE_MS TOKEN"; nil: none);
-- leave(q, a, owner) -> whether we had one. Both keys live as long as their longest ticket could, so nothing is
-- left behind when every waiter dies. A ticket's hand-over lease is a field of its own
-- ("\0" .. owner): an older client reads only the owner's field, a number.
-- pass_on(...): the caller let the name (key) go: hand it to the head (a grant made here over
-- whatever the key held, the fence drawn as the acquire script draws it, for the lease its
-- ticket asks, "LEASE_MS TOKEN"; the message "NAME\0\0FENCE LEASE_MS TOKEN OWNER" tells the
-- head's process it holds it, and the token which of its owner's acquires the ticket was),
-- or, when the head takes no hand-over, delete the key and wake the head to try
-- ("NAME\0OWNER"). Answers whether there was a head (if not, the key is left as it was).

local function head(q, a, now, me)
  while true do
    local hs = redis.call('ZRANGE', q, 0, 1)
    local h = hs[1]
    if not h then return nil, 0 end
    if h == me then return h, 0, nil, hs[2] end
    local t = redis.call('HMGET', a, h, '\0' .. h)
    local u = tonumber(t[1] or '0')
    if u > now then return h, u, t[2], hs[2] end
    redis.call('ZREM', q, h)
    redis.call('HDEL', a, h, '\0' .. h)
  end
end
local function join(q, a, owner, now, life, lease)
  if not redis.call('ZSCORE', q, owner) then
    local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')[2]
    redis.call('ZADD', q, (tonumber(last) or 0) + 1, owner)
  end
  if lease then
    redis.call('HSET', a, owner, string.format('%d', now + life), '\0' .. owner, lease)
  else
    redis.call('HSET', a, owner, string.format('%d', now + life))
  end
  redis.call('PEXPIRE', q, life)
  redis.call('PEXPIRE', a, life)
end
local function leave(q, a, owner)
  redis.call('HDEL', a, owner, '\0' .. owner)
  return redis.call('ZREM', q, owner) == 1
end
local function pass_on(key, fkey, q, a, channel)
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  local now = math.floor(us / 1000)
  local first, _, lease, more = head(q, a, now)
  if not first then return false end
  local ms, token = string.match(lease or '', '^(%d+) (%S+)$')
  if not ms then
    redis.call('DEL', key)
    redis.call('PUBLISH', channel, key .. '\0' .. first)
    return true
  end
  local fence = tonumber(redis.call('GET', fkey) or '0') + 1
  if fence < us then fence = us end
  local fs = string.format('%d', fence)
  redis.call('SET', key, record(fs, '1', string.format('%d', now), more and '3' or '0', '-', first), 'PX', ms)
  redis.call('SET', fkey, fs)
  leave(q, a, first)
  redis.call('PUBLISH', channel, key .. '\0\0' .. fs .. ' ' .. ms .. ' ' .. token .. ' ' .. first)
  return true
end
