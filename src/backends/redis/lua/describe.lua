-- The leases of one name, read atomically, with the server's clock for expires_at:
-- {now_ms, {owner, fence, holds, acquired_at_ms, remaining_ms, mode}...}, mode "x" (an
-- exclusive record, or a semaphore's holder) or "s" (a reader); nil when nobody holds it
-- (or the key is not a dblock lock: a foreign value, a hash without ':permits').

local now = clock()
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'string' then
  local f, h, at, w, a, o = parse(v)
  if not f then return false end
  return {now, {o, tonumber(f), tonumber(h), tonumber(at), redis.call('PTTL', KEYS[1]), 'x'}}
end
if type(v) ~= 'table' or redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return false end
local all = redis.call('HGETALL', KEYS[1])
local out, ours = {now}, false
for i = 1, #all, 2 do
  if all[i] == ':permits' then
    ours = true
  elseif string.sub(all[i], 1, 1) ~= ':' then
    local m, f, e, h, at = holder(all[i + 1])
    if m and tonumber(e) > now then
      out[#out + 1] = {all[i], tonumber(f), tonumber(h), tonumber(at), tonumber(e) - now, m}
    end
  end
end
if not ours then return false end
return out
