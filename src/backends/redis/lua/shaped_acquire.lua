-- Shaped locks (read/write and semaphores; docs/ARCHITECTURE.md, "Lock shapes"): NAME is a
-- hash of holders while readers or a semaphore's holders hold it, and the plain record while
-- a writer does, so a writer and a reader never hold at once (one key, one type). A holder
-- field is the owner, its value "<mode s|x> <fence> <expires_at ms> <holds> <acquired_at ms>"
-- (expires_at on the server's clock, TIME); ':permits' (1 for a read/write lock, N for a
-- semaphore), ':writer' (a writer found readers: until then, on the server's clock, no new
-- reader gets in), ':turn' (a writer that readers waited for released: until then, readers
-- get in whatever the writer mark says, and no writer does; see free.lua) and ':waiting'
-- (1: a subscribed waiter found the name busy, a release that may let it in PUBLISHes) are
-- not holders. The key's PTTL is its latest holder's, writer mark's or turn's expiry.
-- Every grant draws its fence from the name's counter like an exclusive one: max(counter +
-- 1, the server's clock in us).
--
-- Acquire: KEYS name, fence; ARGV owner, ttl_ms, flag_waiting, acquired_at_ms, mode s|x,
-- permits -> fence (granted), {0, holder, remaining_ms} (busy), {-1, permits held} (the
-- name is held with another number of permits: 1 for a mutex or read/write lock), {-2, type}
-- (the key is some other Redis value).

local now, us = clock()
local owner, mode, permits = ARGV[1], ARGV[5], tonumber(ARGV[6])
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'string' then
  local value = redis.call('GET', KEYS[1])
  local f, h, at, w, a, o = parse(value)
  if f and o == owner and h ~= '0' then
    redis.call('DEL', KEYS[1])
    kind = 'none'
  else
    if permits ~= 1 then return {-1, 1} end
    -- 2: readers wait, and the release gives them their turn (see free_script)
    if f and ARGV[3] == '1' and w ~= '2' then redis.call('SET', KEYS[1], record(f, h, at, '2', a, o), 'KEEPTTL') end
    local left = redis.call('PTTL', KEYS[1])
    if left < 0 then left = 0 end
    return {0, o or value, left}
  end
end
local st = {ours = true, permits = permits, writer = 0, turn = 0, waiting = '0', live = 0, soonest = 0, latest = 0}
if kind == 'hash' then
  st = holders(KEYS[1], now, owner)
  if not st.ours then return {-2, kind} end
  if st.permits ~= permits then
    if st.live > 0 then return {-1, st.permits} end
    redis.call('DEL', KEYS[1])
    st = {ours = true, permits = permits, writer = 0, turn = 0, waiting = '0', live = 0, soonest = 0, latest = 0}
  end
elseif kind ~= 'none' then
  return {-2, kind}
end
local left
if mode == 's' then
  if st.writer > now and st.turn == 0 then left = st.writer - now end
elseif st.live >= permits then
  left = st.soonest - now
end
if left then
  if ARGV[3] == '1' and st.waiting ~= '1' then redis.call('HSET', KEYS[1], ':waiting', '1') end
  return {0, st.first or '', left}
end
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
if fence < us then fence = us end
local fs = string.format('%d', fence)
redis.call('SET', KEYS[2], fs)
local e = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], owner, mode .. ' ' .. fs .. ' ' .. string.format('%d', e) .. ' 1 ' .. ARGV[4], ':permits', ARGV[6])
if e > st.latest then st.latest = e end
if st.turn > now + 2 then  -- the readers' turn: its first reader is in, the others it woke come
  st.turn = now + 2        -- within moments; then a waiting writer's mark counts again
  redis.call('HSET', KEYS[1], ':turn', string.format('%d', st.turn))
end
expire(KEYS[1], st, now)
return fence
