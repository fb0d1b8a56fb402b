-- An operator's force release: only a dblock holder's lock (the value is a grant record, or
-- a hash of holders with ':permits': every holder goes at once) is deleted, never a foreign
-- key that merely has the same name. It wakes a waiter of each process, and with KEYS[2],
-- KEYS[3] (the name's fair queue) the oldest fair waiter too.

local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if redis.call('TYPE', KEYS[1]).ok ~= 'hash' or redis.call('HEXISTS', KEYS[1], ':permits') == 0 then return 0 end
elseif not parse(v) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], KEYS[1])
if KEYS[3] then
  local t = redis.call('TIME')
  local first = head(KEYS[2], KEYS[3], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  if first then redis.call('PUBLISH', ARGV[1], KEYS[1] .. '\0' .. first) end
end
return 1
