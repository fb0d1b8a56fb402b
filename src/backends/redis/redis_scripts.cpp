#include "backends/redis/redis_scripts.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail::redis {

void keys::check_name(const std::string& name) {
  for (const auto* prefix : {&fence_prefix, &queue_prefix, &alive_prefix})
    if (name.compare(0, prefix->size(), *prefix) == 0)
      throw UsageError("bad lock name '" + name + "': names beginning '" + *prefix +
                       "' are keys of the redis and redlock backends' own (fence counters, wait queues)");
}

// The lock key's value is the grant record, "<fence> <holds> <acquired_at> <waiting> <attempt>
// <owner>" (owner last: it may contain spaces), so a grant writes one key (SET NX PX) and a
// release deletes one. Every redis.call from Lua costs about as much server time as a bare
// command's whole execution, and a Redlock grant pays it on every node, so the scripts make
// as few as they can and convert few numbers (a strtod or "%.14g" printf in the server).
// with_record(): the script with two helpers in front, so each script reads and writes the
// record the same way: parse(v) -> fence, holds, acquired_at, waiting, attempt, owner (all
// nil when v is nil or not a record: a redis-py token, a value of an older dblock);
// record(...) -> the string again; get(k) -> GET k, or nil when k is not a string (a shaped
// lock's hash), so that a script meets a hash as "not ours" instead of a WRONGTYPE error.
namespace {
// The hash of a shaped lock's holders (see redis_scripts.hpp): clock() -> the server's time
// in ms and us; holder(v) -> mode, fence, expires_at, holds, acquired_at of a holder field's
// value; holders(key, now, drop) reads the hash, deletes expired holders (and `drop`'s
// leftover) and an expired writer mark or readers' turn, and answers its state (ours: the
// hash has ':permits', i.e. it is a dblock lock; a foreign hash is left alone);
// expire(key, st, now) keeps the key exactly as long as its latest holder, the writer mark
// or the readers' turn, or deletes it.
const char* const shaped_helpers = R"lua(
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
)lua";

// A name's queue of fair waiters (redis strategy, exclusive; see acquire_script()): KEYS q, a
// = keys::queue, keys::alive. head(q, a, now, me) -> the oldest live ticket's owner, until
// when it holds, the lease it takes as a hand-over (nil: none) and whether another ticket is
// behind it (nil when none), removing lapsed tickets found in front of it (the asker's own,
// `me`, is live: it is asking); join(...) takes a place at the back or keeps ours, valid
// for `life` ms more, taking hand-overs as `lease` says ("LEASE_MS TOKEN"; nil: none);
// leave(q, a, owner) -> whether we had one. Both keys live as long as their longest ticket could, so nothing is
// left behind when every waiter dies. A ticket's hand-over lease is a field of its own
// ("\0" .. owner): an older client reads only the owner's field, a number.
// pass_on(...): the caller let the name (key) go: hand it to the head (a grant made here over
// whatever the key held, the fence drawn as the acquire script draws it, for the lease its
// ticket asks, "LEASE_MS TOKEN"; the message "NAME\0\0FENCE LEASE_MS TOKEN OWNER" tells the
// head's process it holds it, and the token which of its owner's acquires the ticket was),
// or, when the head takes no hand-over, delete the key and wake the head to try
// ("NAME\0OWNER"). Answers whether there was a head (if not, the key is left as it was).
const char* const queue_helpers = R"lua(
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
)lua";

std::string with_record(const std::string& body) {
  return std::string(R"lua(
local function parse(v)
  if v then return string.match(v, '^(%d+) (%d+) (%d+) (%d) (%S+) (.*)$') end
end
local function record(f, h, at, w, a, o) return f .. ' ' .. h .. ' ' .. at .. ' ' .. w .. ' ' .. a .. ' ' .. o end
local function get(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'string' then return v end
end
)lua") + body;
}
// with_record() and the shaped helpers: for the scripts that may meet a hash of holders
// (acquire's busy path, describe, the shaped scripts). The others only need get() to meet
// it as "not ours", and do not define functions they never call.
std::string with_shapes(const char* body) { return with_record(shaped_helpers + std::string(body)); }
std::string with_queue(const char* body) { return with_record(queue_helpers + std::string(body)); }
}  // namespace

// Acquire. The common case (a free name) comes first: the next fence, then SET NX PX the
// record (the same SET NX PX redis-py takes its lock with), then the counter raised to the
// fence. The fence is max(counter + 1, floor), the floor being a clock in microseconds:
// ARGV[6] when given (Redlock sends the client's clock, so nodes whose counters agree answer
// one fence), else the server's TIME. The counter orders grants while Redis keeps it; the
// clock orders them when Redis lost it (a crash before the append-only file's fsync, no
// persistence, an evicted key, a failover to a replica that had not seen the last grants),
// unless that clock stepped back by more than the time the loss took (docs/ARCHITECTURE.md,
// "Redis and Redlock"). Microseconds stay below 2^53 until the year 2255, so Lua's doubles
// hold every fence exactly.
// It answers just the fence (an integer: the lease is the TTL the caller asked for).
// acquired_at is the caller's clock (ARGV[4], ms; for listing only: expiry is the key's
// PTTL, the server's). ARGV[5] names the attempt (Redlock's undo removes only what its own
// attempt wrote; "-" where nothing is undone).
// A record that names our owner is a leftover (the client asks afresh only when it holds no
// live grant: LockDriver::try_acquire): it is taken over with the new fence, unless it was
// kept after its release (holds 0: keep_script), which is busy like anyone else's. A busy name
// answers {0, holder, PTTL}, so that waiters sleep no longer than the holder's lease (0 for
// a key without TTL: a redis-py lock taken without timeout); the holder is the record's
// owner, or a foreign key's whole value. With ARGV[3] = 1 (the caller is subscribed to
// releases, or will be before it tries again) a busy attempt flags the holder's record
// `waiting`, and only a release of a flagged grant PUBLISHes: a waiter flags before it
// subscribes and tries once more after, so it cannot miss the release, and an uncontended
// release publishes nothing. A foreign holder is not flagged: its release does not publish
// anyway. Redlock tells a split vote from a holder with a majority by the holder named.
//
// Fair waiting (redis strategy, LockOptions::fair; docs/ARCHITECTURE.md, "Redis and
// Redlock"): with KEYS[3], KEYS[4] (the name's queue, queue_helpers) the asker may take the
// name only when it has the oldest live ticket or no ticket lives; a grant removes its
// ticket, and marks the record waiting (3) when others are still queued, so that its release
// passes the name on. Not its turn: busy, for no longer than the head's ticket may stay (a
// dead head blocks nobody past it). A busy answer joins the queue or keeps the asker's place
// for ARGV[8] ms, taking hand-overs as ARGV[9] says ("LEASE_MS TOKEN"; absent or 0: none);
// ARGV[8] = 0 (a try, or the acquire's last attempt) leaves it and writes nothing else. A subscribed fair waiter
// flags the holder's record 3: its release then hands the name to the head, or wakes it
// (pass_on).
const Script& acquire_script() {
  static const Script s(with_record(shaped_helpers + std::string(queue_helpers) + R"lua(
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
)lua"));
  return s;
}

// Renew: only the holder of this very grant (owner and fence) may extend, so a stale grant
// of the same owner never resurrects or prolongs a newer one. Like the SQL strategies it
// keeps the longer of what is left and the new TTL (ttl 0: only the holds change), and
// writes the owner's hold count (ARGV[4]) when it changed: the client keeps the count, the
// record shows it. Fences and holds compare as decimal strings: both sides are canonical
// (string.format('%d')'s, std::to_string's), and no float is involved.
const Script& renew_script() {
  static const Script s(with_record(R"lua(
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
)lua"));
  return s;
}

// Release, and Redlock's undo of an attempt that did not win: deletes the record if it is
// ours and, if a waiter flagged the grant (see acquire), tells the waiters (PUBLISH), all in
// one step. If readers flagged it (waiting 2), the name becomes the readers' for 100 ms (a
// hash of no holders with ':turn'): the readers this release wakes get in even if a writer
// that loops is back first (no writer gets in during the turn, and its mark does not keep
// readers out), so readers beside a busy writer are not starved. The first reader in cuts
// the turn to 2 ms more, for the others that release woke (they come within moments), so
// 100 ms is only what a writer loses when the readers gave up meanwhile: long enough for a
// woken reader on a loaded machine, short beside a lease. A release names the grant by its
// fence (the same check as renew). An undo names the attempt: the node may have granted
// with a fence we never saw (its answer timed out), and only a record this very attempt
// wrote may go, so an undo that arrives where the attempt never ran (or after another one)
// changes nothing. With KEYS[2], KEYS[3], KEYS[4] (the name's fair queue and its fence
// counter) the release of a grant flagged 3 passes the name on to the oldest live waiter
// (queue_helpers' pass_on: handed over, or woken to try).
const Script& free_script() {
  static const Script s(with_record(queue_helpers + std::string(R"lua(
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
)lua")));
  return s;
}

// A fair waiter that gives up (its acquire timed out or threw) leaves the queue: KEYS name,
// queue, alive, fence; ARGV owner, channel -> 1 if it had a place. If the name is free, it
// is passed on (the waiter now first may have been waiting for us to take our turn); if it
// is ours (handed over as we gave up, or a grant whose answer was lost), it is freed and
// passed on: the acquire ends without a lease, so nobody would use it.
const Script& leave_script() {
  static const Script s(with_queue(R"lua(
local had = leave(KEYS[2], KEYS[3], ARGV[1])
local v = redis.pcall('GET', KEYS[1])
local f, h, at, w, a, o = parse(type(v) == 'string' and v or nil)
if o == ARGV[1] and h ~= '0' then
  redis.call('DEL', KEYS[1])
  pass_on(KEYS[1], KEYS[4], KEYS[2], KEYS[3], ARGV[2])
  return 1
end
if not had then return 0 end
if not v then pass_on(KEYS[1], KEYS[4], KEYS[2], KEYS[3], ARGV[2]) end
return 1
)lua"));
  return s;
}

// A release that keeps the lock taken for ARGV[3] ms more (LockOptions::hold_at_least): the
// same check as release, then holds 0 (kept: see acquire) and exactly that expiry.
const Script& keep_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, a, o = parse(get(KEYS[1]))
if o ~= ARGV[1] or f ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], record(f, '0', at, w, a, o), 'PX', ARGV[3])
return 1
)lua"));
  return s;
}

// Redlock's fence write-back: raise the node's counter to the grant's fence F (so that the
// next grant, whose majority overlaps this one, draws past F) and record F as the fence
// of our hold there. Answers whether we hold the name on this node.
const Script& fence_script() {
  static const Script s(with_record(R"lua(
if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
local f, h, at, w, a, o = parse(get(KEYS[1]))
if o ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], record(ARGV[2], h, at, w, a, o), 'KEEPTTL')
return 1
)lua"));
  return s;
}

// An operator's force release: only a dblock holder's lock (the value is a grant record, or
// a hash of holders with ':permits': every holder goes at once) is deleted, never a foreign
// key that merely has the same name. It wakes a waiter of each process, and with KEYS[2],
// KEYS[3] (the name's fair queue) the oldest fair waiter too.
const Script& force_release_script() {
  static const Script s(with_record(queue_helpers + std::string(R"lua(
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
)lua")));
  return s;
}

// The leases of one name, read atomically, with the server's clock for expires_at:
// {now_ms, {owner, fence, holds, acquired_at_ms, remaining_ms, mode}...}, mode "x" (an
// exclusive record, or a semaphore's holder) or "s" (a reader); nil when nobody holds it
// (or the key is not a dblock lock: a foreign value, a hash without ':permits').
const Script& describe_script() {
  static const Script s(with_shapes(R"lua(
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
)lua"));
  return s;
}

// Shaped locks (read/write and semaphores; docs/ARCHITECTURE.md, "Lock shapes"): NAME is a
// hash of holders while readers or a semaphore's holders hold it, and the plain record while
// a writer does, so a writer and a reader never hold at once (one key, one type). A holder
// field is the owner, its value "<mode s|x> <fence> <expires_at ms> <holds> <acquired_at ms>"
// (expires_at on the server's clock, TIME); ':permits' (1 for a read/write lock, N for a
// semaphore), ':writer' (a writer found readers: until then, on the server's clock, no new
// reader gets in), ':turn' (a writer that readers waited for released: until then, readers
// get in whatever the writer mark says, and no writer does; see free_script) and ':waiting'
// (1: a subscribed waiter found the name busy, a release that may let it in PUBLISHes) are
// not holders. The key's PTTL is its latest holder's, writer mark's or turn's expiry.
// Every grant draws its fence from the name's counter like an exclusive one: max(counter +
// 1, the server's clock in us).
//
// Acquire: KEYS name, fence; ARGV owner, ttl_ms, flag_waiting, acquired_at_ms, mode s|x,
// permits -> fence (granted), {0, holder, remaining_ms} (busy), {-1, permits held} (the
// name is held with another number of permits: 1 for a mutex or read/write lock), {-2, type}
// (the key is some other Redis value).
const Script& shaped_acquire_script() {
  static const Script s(with_shapes(R"lua(
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
)lua"));
  return s;
}

// Renew a holder: KEYS name; ARGV owner, fence, ttl_ms, holds -> remaining_ms, or nil when
// not ours (no such holder with that fence, or it expired). Keeps the longer of what is left
// and ttl (ttl 0: only the holds change), as the exclusive renewal does.
const Script& shaped_renew_script() {
  static const Script s(with_shapes(R"lua(
local v = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(v) ~= 'string' then return false end
local m, f, e, h, at = holder(v)
local now = clock()
if f ~= ARGV[2] or tonumber(e) <= now then return false end
e = tonumber(e)
if now + tonumber(ARGV[3]) > e then e = now + tonumber(ARGV[3]) end
redis.call('HSET', KEYS[1], ARGV[1], m .. ' ' .. f .. ' ' .. string.format('%d', e) .. ' ' .. ARGV[4] .. ' ' .. at)
if redis.call('PTTL', KEYS[1]) < e - now then redis.call('PEXPIRE', KEYS[1], e - now) end
return e - now
)lua"));
  return s;
}

// Release a holder: KEYS name; ARGV owner, fence, channel -> 1 freed, 0 not ours. The key
// goes with its last holder (unless a writer's mark keeps it); if a waiter flagged it and
// the release may let one in (the last reader went, or a semaphore's permit came free),
// PUBLISHes the name and clears the flag (a waiter still busy sets it again).
const Script& shaped_release_script() {
  static const Script s(with_shapes(R"lua(
local v = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(v) ~= 'string' then return 0 end
local m, f, e = holder(v)
local now = clock()
if f ~= ARGV[2] or tonumber(e) <= now then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
local st = holders(KEYS[1], now, nil)
if st.waiting == '1' and (st.live == 0 or st.permits > 1) then
  redis.call('HDEL', KEYS[1], ':waiting')
  redis.call('PUBLISH', ARGV[3], KEYS[1])
end
expire(KEYS[1], st, now)
return 1
)lua"));
  return s;
}

// A holder's release that keeps its place for keep_ms more (LockOptions::hold_at_least):
// KEYS name; ARGV owner, fence, keep_ms -> 1 kept (holds 0), 0 not ours.
const Script& shaped_keep_script() {
  static const Script s(with_shapes(R"lua(
local v = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(v) ~= 'string' then return 0 end
local m, f, e, h, at = holder(v)
local now = clock()
if f ~= ARGV[2] or tonumber(e) <= now then return 0 end
e = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], m .. ' ' .. f .. ' ' .. string.format('%d', e) .. ' 0 ' .. at)
expire(KEYS[1], holders(KEYS[1], now, nil), now)
return 1
)lua"));
  return s;
}

}  // namespace dblock::detail::redis
