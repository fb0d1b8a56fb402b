-- The grant record's helpers, put in front of every script (redis_scripts.cpp, with_record),
-- so that each script reads and writes the record the same way. The lock key's value is the
-- grant record, "<fence> <holds> <acquired_at> <waiting> <attempt> <owner>" (owner last: it
-- may contain spaces), so a grant writes one key (SET NX PX) and a release deletes one.
-- Every redis.call from Lua costs about as much server time as a bare command's whole
-- execution, and a Redlock grant pays it on every node, so the scripts make as few as they
-- can and convert few numbers (a strtod or "%.14g" printf in the server).
-- parse(v) -> fence, holds, acquired_at, waiting, attempt, owner (all nil when v is nil or
-- not a record: a redis-py token, a value of an older dblock); record(...) -> the string
-- again; get(k) -> GET k, or nil when k is not a string (a shaped lock's hash), so that a
-- script meets a hash as "not ours" instead of a WRONGTYPE error.

local function parse(v)
  if v then return string.match(v, '^(%d+) (%d+) (%d+) (%d) (%S+) (.*)$') end
end
local function record(f, h, at, w, a, o) return f .. ' ' .. h .. ' ' .. at .. ' ' .. w .. ' ' .. a .. ' ' .. o end
local function get(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'string' then return v end
end
