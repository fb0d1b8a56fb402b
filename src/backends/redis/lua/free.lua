-- Release, and Redlock's undo of an attempt that did not win: deletes the record if it is
-- ours and, if a waiter flagged the grant (see acquire), tells the waiters (PUBLISH), all in
-- one step. If readers flagged it (waiting 2), the name becomes the readers' for 100 ms (a
-- hash of no holders with ':turn'): the readers this release wakes get in even if a writer
-- that loops is back first (no writer gets in during the turn, and its mark does not keep
-- readers out), so readers beside a busy writer are not starved. The first reader in cuts
-- the turn to 2 ms more, for the others that release woke (they come within moments), so
-- 100 ms is only what a writer loses when the readers gave up meanwhile: long enough for a
-- woken reader on a loaded machine, short beside a lease. A release names the grant by its
-- fence (the same check as renew). An undo names the attempt: the node may have granted
-- with a fence we never saw (its answer timed out), and only a record this very attempt
-- wrote may go, so an undo that arrives where the attempt never ran (or after another one)
-- changes nothing. With KEYS[2], KEYS[3], KEYS[4] (the name's fair queue and its fence
-- counter) the release of a grant flagged 3 passes the name on to the oldest live waiter
-- (queue_helpers.lua's pass_on: handed over, or woken to try).

local f, h, at, w, a, o = parse(get(KEYS[1]))
local grant = f
if ARGV[2] == 'attempt' then grant = a end
if o ~= ARGV[1] or grant ~= ARGV[3] then return 0 end
if w == '3' and KEYS[3] and pass_on(KEYS[1], KEYS[4], KEYS[2], KEYS[3], ARGV[4]) then return 1 end  -- freed
redis.call('DEL', KEYS[1])
if w == '2' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', KEYS[1], ':permits', '1', ':turn', string.format('%d', now + 100))
  redis.call('PEXPIRE', KEYS[1], 100)
end
if w ~= '0' then redis.call('PUBLISH', ARGV[4], KEYS[1]) end
return 1
