-- A name's queue of fair waiters (redis strategy, exclusive; see acquire.lua): KEYS q, a
-- = keys::queue, keys::alive. head(q, a, now, me) -> the oldest live ticket's owner, until
-- when it holds, the lease it takes as a hand-over (nil: none) and whether another ticket is
-- behind it (nil when none), removing lapsed tickets found in front of it (the asker's own,
-- `me`, is live: it is asking); join(...) takes a place at the back or keeps ours, valid
-- for `life` ms more, taking hand-overs as `lease` says ("LEASE_MS TOKEN LIST"; nil: none);
-- leave(q, a, owner) -> whether we had one. Both keys live at least as long as their longest
-- ticket could (at most twice that), so nothing is left behind when every waiter dies. A
-- ticket's hand-over lease is a field of its own ("\0" .. owner): an older client reads only
-- the owner's field, a number.
-- pass_on(...): the caller let the name (key) go: hand it to the head (a grant made here over
-- whatever the key held, the fence drawn as the acquire script draws it, for the lease its
-- ticket asks, "LEASE_MS TOKEN LIST"; the message "NAME\0\0FENCE LEASE_MS TOKEN OWNER",
-- pushed on the head's process's list LIST, tells it that it holds the name, and the token
-- which attempt of its owner wrote the ticket), or, when the head takes no hand-over, delete
-- the key and wake the head to try ("NAME\0OWNER", published). The list is a key, not the
-- channel: only who may write the lock's keys (and so could take the lock anyway) can put a
-- grant there, where anyone who may PUBLISH could forge one on the channel, so the head takes
-- it without reading the record back. It expires a minute after its last push, when its
-- process died. A ticket of an older dblock ("LEASE_MS TOKEN") is woken, not handed the name.
-- Answers whether there was a head (if not, the key is left as it was).

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
  -- A write costs the server (and its append-only file) several times a read, so the keys'
  -- expiry is pushed out only when it comes within a ticket's life: to twice that.
  if redis.call('PTTL', q) < life then redis.call('PEXPIRE', q, 2 * life) end
  if redis.call('PTTL', a) < life then redis.call('PEXPIRE', a, 2 * life) end
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
  local ms, token, list = string.match(lease or '', '^(%d+) (%S+) (%S+)$')
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
  redis.call('RPUSH', list, key .. '\0\0' .. fs .. ' ' .. ms .. ' ' .. token .. ' ' .. first)
  redis.call('PEXPIRE', list, 60000)
  return true
end
