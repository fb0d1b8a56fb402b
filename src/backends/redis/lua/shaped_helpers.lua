-- The hash of a shaped lock's holders (see redis_scripts.hpp): clock() -> the server's time
-- in ms and us; holder(v) -> mode, fence, expires_at, holds, acquired_at of a holder field's
-- value; holders(key, now, drop) reads the hash, deletes expired holders (and `drop`'s
-- leftover) and an expired writer mark or readers' turn, and answers its state (ours: the
-- hash has ':permits', i.e. it is a dblock lock; a foreign hash is left alone);
-- expire(key, st, now) keeps the key exactly as long as its latest holder, the writer mark
-- or the readers' turn, or deletes it.

local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function holder(v) return string.match(v, '^([sx]) (%d+) (%d+) (%d+) (%d+)$') end
local function holders(key, now, drop)
  local all = redis.call('HGETALL', key)
  local st = {ours = false, permits = 1, writer = 0, turn = 0, waiting = '0', live = 0, soonest = 0, latest = 0}
  local dead = {}
  for i = 1, #all, 2 do
    local k, v = all[i], all[i + 1]
    if k == ':permits' then st.ours = true; st.permits = tonumber(v)
    elseif k == ':waiting' then st.waiting = v
    elseif k == ':writer' then
      st.writer = tonumber(v) or 0
      if st.writer <= now then st.writer = 0; dead[#dead + 1] = k end
    elseif k == ':turn' then
      st.turn = tonumber(v) or 0
      if st.turn <= now then st.turn = 0; dead[#dead + 1] = k end
    else
      local m, f, e, h = holder(v)
      e = tonumber(e)
      if m and e > now and not (k == drop and h ~= '0') then
        st.live = st.live + 1
        if not st.first then st.first = k end
        if st.soonest == 0 or e < st.soonest then st.soonest = e end
        if e > st.latest then st.latest = e end
      else
        dead[#dead + 1] = k
      end
    end
  end
  if st.ours then
    for i = 1, #dead, 1000 do redis.call('HDEL', key, unpack(dead, i, math.min(i + 999, #dead))) end
  end
  return st
end
local function expire(key, st, now)
  local keep = math.max(st.latest, st.writer, st.turn)
  if keep > now then redis.call('PEXPIRE', key, keep - now) else redis.call('DEL', key) end
end
