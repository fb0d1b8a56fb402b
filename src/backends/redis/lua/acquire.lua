-- Acquire. The common case (a free name) comes first: the next fence, then SET NX PX the
-- record (the same SET NX PX redis-py takes its lock with), then the counter raised to the
-- fence. The fence is max(counter + 1, floor), the floor being a clock in microseconds:
-- ARGV[6] when given (Redlock sends the client's clock, so nodes whose counters agree answer
-- one fence), else the server's TIME. The counter orders grants while Redis keeps it; the
-- clock orders them when Redis lost it (a crash before the append-only file's fsync, no
-- persistence, an evicted key, a failover to a replica that had not seen the last grants),
-- unless that clock stepped back by more than the time the loss took (docs/ARCHITECTURE.md,
-- "Redis and Redlock"). Microseconds stay below 2^53 until the year 2255, so Lua's doubles
-- hold every fence exactly.
-- It answers just the fence (an integer: the lease is the TTL the caller asked for).
-- acquired_at is the caller's clock (ARGV[4], ms; for listing only: expiry is the key's
-- PTTL, the server's). ARGV[5] names the attempt (Redlock's undo removes only what its own
-- attempt wrote; "-" where nothing is undone).
-- A record that names our owner is a leftover (the client asks afresh only when it holds no
-- live grant: LockDriver::try_acquire): it is taken over with the new fence, unless it was
-- kept after its release (holds 0: keep.lua), which is busy like anyone else's. A busy name
-- answers {0, holder, PTTL}, so that waiters sleep no longer than the holder's lease (0 for
-- a key without TTL: a redis-py lock taken without timeout); the holder is the record's
-- owner, or a foreign key's whole value. With ARGV[3] = 1 (the caller is subscribed to
-- releases, or will be before it tries again) a busy attempt flags the holder's record
-- `waiting`, and only a release of a flagged grant PUBLISHes: a waiter flags before it
-- subscribes and tries once more after, so it cannot miss the release, and an uncontended
-- release publishes nothing. A foreign holder is not flagged: its release does not publish
-- anyway. Redlock tells a split vote from a holder with a majority by the holder named.
--
-- Fair waiting (redis strategy, LockOptions::fair; docs/ARCHITECTURE.md, "Redis and
-- Redlock"): with KEYS[3], KEYS[4] (the name's queue, queue_helpers.lua) the asker may take the
-- name only when it has the oldest live ticket or no ticket lives; a grant removes its
-- ticket, and marks the record waiting (3) when others are still queued, so that its release
-- passes the name on. Not its turn: busy, for no longer than the head's ticket may stay (a
-- dead head blocks nobody past it). A busy answer joins the queue or keeps the asker's place
-- for ARGV[8] ms, taking hand-overs as ARGV[9] says ("LEASE_MS TOKEN LIST"; absent or 0: none);
-- ARGV[8] = 0 (a try, or the acquire's last attempt) leaves it and writes nothing else. A subscribed fair waiter
-- flags the holder's record 3: its release then hands the name to the head, or wakes it
-- (pass_on).

local floor, now = tonumber(ARGV[6]), nil
if not floor then
  local t = redis.call('TIME')
  floor = t[1] * 1000000 + t[2]
  now = math.floor(floor / 1000)
end
local q, life, first, until_, more, w0 = KEYS[3], tonumber(ARGV[8] or '0'), nil, 0, nil, '0'
local _
local lease = ARGV[9]
if lease == '0' then lease = nil end
if q then
  now = now or clock()
  first, until_, _, more = head(q, KEYS[4], now, ARGV[1])
  if first == ARGV[1] and more then w0 = '3' end
end
local turn = not first or first == ARGV[1]
local function busy(holder, left)  -- the fair asker keeps its place, or gives it up
  if q then
    if life > 0 then join(q, KEYS[4], ARGV[1], now, life, lease) else leave(q, KEYS[4], ARGV[1]) end
  end
  return {0, holder, left}
end
local fence, fs
local function draw()  -- the next fence, read only where a grant may follow
  fence = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
  if fence < floor then fence = floor end
  fs = string.format('%d', fence)
end
if turn then
  draw()
  if redis.call('SET', KEYS[1], record(fs, '1', ARGV[4], w0, ARGV[5], ARGV[1]), 'NX', 'PX', ARGV[2]) then
    redis.call('SET', KEYS[2], fs)
    if first then leave(q, KEYS[4], ARGV[1]) end
    return fence
  end
end
local value = redis.pcall('GET', KEYS[1])
if type(value) == 'table' then
  local kind = redis.call('TYPE', KEYS[1]).ok
  now = now or clock()
  local st = kind == 'hash' and holders(KEYS[1], now, ARGV[1])
  if not (st and st.ours) then return {-2, kind} end
  if st.live == 0 and st.turn == 0 then
    if not turn then return busy(first, until_ - now) end
    redis.call('DEL', KEYS[1])
    if not fs then draw() end
    if w0 == '3' then st.waiting = w0 end
    redis.call('SET', KEYS[1], record(fs, '1', ARGV[4], st.waiting, ARGV[5], ARGV[1]), 'PX', ARGV[2])
    redis.call('SET', KEYS[2], fs)
    if first then leave(q, KEYS[4], ARGV[1]) end
    return fence
  end
  if st.permits ~= 1 then return {-1, st.permits} end
  local mark = tonumber(ARGV[7] or '0')
  if mark > 0 and now + mark > st.writer then
    st.writer = now + mark
    redis.call('HSET', KEYS[1], ':writer', string.format('%d', st.writer))
  end
  if ARGV[3] == '1' and st.waiting ~= '1' then redis.call('HSET', KEYS[1], ':waiting', '1') end
  expire(KEYS[1], st, now)
  local left = math.max(st.latest, st.turn) - now
  if mark > 0 and left > mark / 2 then left = math.floor(mark / 2) end
  return busy(st.first or '', left)
end
local f, h, at, w, a, o = parse(value)
if f and o == ARGV[1] and h ~= '0' then
  if not fs then draw() end
  redis.call('SET', KEYS[1], record(fs, '1', ARGV[4], w, ARGV[5], o), 'PX', ARGV[2])
  redis.call('SET', KEYS[2], fs)
  if q then leave(q, KEYS[4], ARGV[1]) end
  return fence
end
if not value then return busy(first, until_ - now) end  -- free, but an older waiter's turn
local flag = q and '3' or '1'
if f and ARGV[3] == '1' and (w == '0' or (w == '1' and flag == '3')) then
  redis.call('SET', KEYS[1], record(f, h, at, flag, a, o), 'KEEPTTL')
end
-- Behind another waiter, the holder's expiry is the head's to watch: wait no longer than the
-- head's ticket may stay.
if not turn then return busy(o or value, until_ - now) end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then left = 0 end
return busy(o or value, left)
