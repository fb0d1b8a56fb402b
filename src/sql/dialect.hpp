// Dialect: the one place SQL databases differ. Each dialect is a table of statement texts;
// the strategies (insert_driver.cpp, optimistic_driver.cpp), the migrator and SqlBackend
// run them without knowing which database they talk to.
//
// Placeholders, replaced once per Client by render():
//   ${table}       the lock table, schema-qualified if it was given so
//   ${table_name}  the lock table without its schema
//   ${now_ms}      an expression for the database clock in milliseconds since the epoch
//   ${until:ROW}   where the dialect has Client rows: until when the lock table's row ROW (an
//                  alias) is held, its own valid_until or its Client row's, the later
// Parameters are positional, in the dialect's own marker syntax (?1 in SQLite, $1 in
// PostgreSQL), in the order given beside each statement.
//
// Lock table columns (migrations/<dialect>/V1__...): name, owner, fence, holds,
// acquired_at, valid_until (both ms on the database clock) and version. A row is held while
// valid_until > now; a free optimistic row has owner '' and valid_until 0. Where the dialect
// has Client rows (client_renew), a renewed lease's row also names its Client's row in
// ${table}_clients (column client), and is held while either is valid: one write per Client
// and tick keeps all its leases (docs/ARCHITECTURE.md, "Renewal"). Fences come from
// a per-table counter (${table}_fence) that only grows, so they survive release, sweep and
// row deletion.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/validate.hpp"
#include "dblock/options.hpp"
#include "dblock/settings.hpp"

namespace dblock::detail::sqldb {

class Connection;

// The statements a dialect gives, each a text in Dialect::text. Parameters in brackets,
// answers after the arrow. Optional ones (Dialect::offers) are marked; Dialect::check()
// says which a dialect must give.
enum class Statement : std::size_t {
  // Shared by the lease strategies.
  holder,  // (name) -> owner, remaining_ms of the unexpired holder, if any
  // (name, owner, fence, ttl_ms, holds) -> remaining_ms; no row: not ours. Extends to at
  // least ttl_ms from now (ttl 0: not at all) and writes the owner's hold count, which the
  // core keeps (re-entries and the renewals by the watchdog both come through here).
  renew,
  // (items) -> name, fence, remaining_ms per row renewed: renew for many rows in one statement
  // (a Client's leases due at one renewal tick). `items` is a JSON array of
  // [name, owner, fence, ttl_ms, holds, client]; a row not answered is not ours. Where the
  // dialect has Client rows, each row renewed names `client` from then on.
  renew_batch,
  // Optional, both or neither: Client rows (${table}_clients), one per Client and TTL.
  client_create,  // (client, ttl_ms): a new row, valid ttl_ms from now
  // (client, ttl_ms) -> name, fence, remaining_ms per lease row naming the client, after
  // extending its row to ttl_ms from now, only while it is still valid (an expired one stays
  // so: its leases may have been taken over); one row with name '' when it names none; no
  // row when it had expired.
  client_renew,
  // (client, name, fence): the row stops naming the Client row (a lease the Client declared
  // lost); it is held by its own valid_until alone from then on.
  client_detach,

  // insert: a row per held lock; an upsert wins it, takes over an expired row or a leftover
  // of the same owner's (always with a new fence: the core never acquires afresh what it
  // holds; a row kept after its release, holds 0, is no leftover but busy). (name, owner, ttl_ms) -> fence, remaining_ms. Busy: either no row (the driver
  // then asks `holder`) or, where the dialect can say it in the same round trip, fence 0 and
  // the holder's remaining_ms.
  insert_acquire,
  insert_release,  // (name, owner, fence): delete (or free) our row; affected 1 or 0
  // Optional, the uncontended path where waiters mark the name's row (wait_mark): the two
  // above as single statements for a name nobody waits for. The grant (name, owner, ttl_ms)
  // -> fence, remaining_ms, or no row (the name has a row, or another's turn: insert_acquire
  // then answers); the release (name, owner, fence) deletes our unmarked row: ours when a
  // row is answered, or else when one row changed (marked, or not ours: insert_release then
  // answers).
  insert_acquire_unmarked,
  insert_release_unmarked,
  // (name, owner, fence, keep_ms): our row, released but kept (LockOptions::hold_at_least):
  // holds 0 and valid_until = now + keep_ms; affected 1 or 0. Both lease strategies use it.
  release_after,

  // optimistic: a persistent row per name, taken by compare-and-set on version (a missing
  // row, or a leftover of the same owner's, goes through insert_acquire). A take matches a
  // free row only: the version read may belong to a row the sweeper removed since, and a
  // re-created row can reach the same version while held (ABA).
  optimistic_read,  // (name) -> owner, version, remaining_ms
  // (name, owner, ttl_ms, version) -> fence, remaining_ms; no row: lost, read again. Where the
  // dialect can say more in the same round trip, a lost take returns fence 0 and the holder's
  // remaining_ms (busy; 0: someone is taking it right now, also busy) or -1 (read again).
  optimistic_take,
  // (name, owner, fence): free our row; affected 1 or 0. Also one row whose last column is
  // the freed row's new version (RETURNING; MySQL: LAST_INSERT_ID(expr) and a SELECT of it):
  // this Client's next acquire tries the compare-and-set on it without reading first.
  optimistic_release,
  // Optional, as insert's unmarked pair (with wait_mark): the take (name, owner, ttl_ms,
  // version) -> fence, remaining_ms of a free, unmarked row still at that version, or no row
  // (optimistic_take then answers); the release (name, owner, fence) frees our unmarked row
  // and answers its new version last, or no row (optimistic_release then answers).
  optimistic_take_unmarked,
  optimistic_release_unmarked,
  // Optional, with release notifications or Dialect::waiters_read_handed: the two releases
  // above as the release of a grant made after waiting (others are likely queued), which,
  // with a live ticket of another owner in the name's queue, grants the row to the lowest
  // instead (a hand-over, for the lease that ticket's waiter asked for) and tells the head's
  // process through the notifier (LeaseDriver::take_handover, which confirms it with
  // handed_check), or leaves it to the head's own read. Answers one row whose last column
  // is -1 when it handed the row over (LeaseDriver::released). Apart from
  // the plain releases because the hand-over's statements cost an uncontended release about
  // 25 us (7 %) even when they find no ticket.
  insert_handover,
  optimistic_handover,

  // Session strategies (given when the dialect offers them): the lock lives in one
  // connection, pinned while held, and is freed by the server when that connection drops.
  // Fences are drawn only once the lock is held (a fence drawn before waiting could be
  // overtaken by a later grant), by advisory's lock statements themselves and by
  // fence_next for for-update.
  session_wait,  // (wait_ms): bound the next lock wait in this transaction
  ping,          // (): is the pinned connection alive
  // for-update: a row per name, locked by SELECT ... FOR UPDATE in an open transaction.
  for_update_create,  // (name): the row, unless it exists
  for_update_try,     // (name) -> a row when locked; no row: no row yet; lock error: busy
  for_update_wait,    // (name) -> the same, waiting within session_wait's bound
  // Optional: the same two, shared (a read/write lock's readers: a share lock on the row).
  // Given, for-update offers Mode::shared; only where a waiting exclusive lock makes new
  // share lockers queue behind it (InnoDB; not PostgreSQL's FOR SHARE), so writers are
  // not starved.
  for_update_try_shared,
  for_update_wait_shared,
  // (): draws a fence in a committed transaction of its own. for-update draws it with this
  // on another connection once its row is locked: a fence drawn inside the locking
  // transaction, which stays open while the lock is held and then rolls back, is not durable
  // (PostgreSQL flushes a sequence's WAL record at the drawing transaction's commit: after a
  // crash the same fence was granted again), and on MySQL it would keep the counter row
  // locked for the whole hold.
  fence_next,
  // Optional: (the locking transaction, as for_update_try and for_update_wait answer it) ->
  // a fence drawn as fence_next draws it, answered only if that transaction was still
  // running after the draw (NULL otherwise). Given, it replaces fence_next and the ping on
  // the pinned connection that shows the row was still locked when the fence was drawn:
  // one round trip fewer per grant.
  fence_next_held,
  // advisory: the database's own named locks on a 64-bit key (see advisory_key()).
  advisory_try,     // (key) -> fence when locked, 0 when busy
  advisory_wait,    // (key) -> fence; a lock-timeout error past session_wait's bound
  advisory_unlock,  // (key)
  // Optional: (key, wait_ms) -> fence; a lock-timeout error past wait_ms. One statement that
  // bounds its own wait and commits on its own (no BEGIN, session_wait, COMMIT around it), so
  // a waiter woken by the release has nothing left to send. The driver keeps wait_ms below the
  // session's statement timeout, which a statement cannot lift for itself.
  advisory_wait_bounded,
  // Optional: the same four, shared (a read/write lock's readers: pg_advisory_lock_shared).
  // Given, the advisory strategy offers Mode::shared (SqlBackend::shapes). A shared grant
  // draws its fence the same way, once held, so a writer's is above every reader's before it.
  advisory_try_shared,
  advisory_wait_shared,
  advisory_unlock_shared,
  advisory_wait_bounded_shared,

  // Optional: read/write locks and semaphores on the lease strategies (docs/ARCHITECTURE.md,
  // "Lock shapes"). Shared holders (readers: mode 's'; a semaphore's holders: mode 'x') are
  // rows of ${table}_holders; the name's row in ${table} is owned by ':readers' or
  // ':semaphore' while they hold, and lasts as long as the latest of them, so every exclusive
  // acquire is busy behind it with no statement of its own changed. Given, both lease
  // strategies offer both shapes (SqlBackend::shapes).
  // (name, owner, mode, permits, ttl_ms) -> fence, remaining: fence > 0 granted; 0 busy for
  // remaining ms; the asker disagrees about what the name is (a UsageError): -1 a semaphore
  // of `remaining` permits holds it, -2 readers hold it, -3 an exclusive holder does (asked
  // for a semaphore). No row: ask shared_busy.
  shared_acquire,
  shared_busy,  // optional: (name, owner, mode, permits) -> the same two columns, for no row above
  shared_renew,          // as renew, for a shared holder's row
  // As insert_release and release_after, for a shared holder's row (a release also wakes
  // waiters): ours when a row is answered, or else when one row changed.
  shared_release,
  shared_release_after,
  // (name, owner, mark_ms): a writer busy behind readers marks the name for mark_ms, and new
  // readers queue behind it meanwhile (writers preferred); affected 1 when marked.
  writer_mark,
  writer_unmark,  // (name, owner): the mark goes (the writer got in, or gave up)
  sweep_holders,  // (batch): delete up to batch expired holders and marks; affected = deleted
  // Optional: fair waiting on the lease strategies (docs/ARCHITECTURE.md, "Fair waiting").
  // Given, insert_acquire and optimistic_take take one parameter more (before the row wait
  // of Dialect::grant_waits_bounded), the asker's ticket:
  // 0 asks unfairly (the queue is not looked at), no_ticket asks fairly without a ticket
  // (any live ticket of another owner goes first), else the asker's own. A grant is made
  // only when no live ticket of another owner is lower, and deletes the winner's ticket.
  // (name, owner, keep_ms, ticket, lease_ms) -> ticket: joins the name's queue (ticket 0: a
  // new ticket behind every other) or keeps a ticket alive (the same one, written back), for
  // keep_ms from now; a hand-over grants its waiter lease_ms (the TTL it asked for). No row
  // where a ticket a release handed the row to is not written back.
  queue_join,
  queue_leave,  // (name, owner): the ticket goes (the waiter gave up); the next is woken
  // Optional, with insert_acquire_unmarked: (name, keep_ms) -> the row's time left in ms (or
  // any positive number), none when the name has no row. Every acquire that waits marks the
  // name's row until keep_ms from now, and again while it waits, so that the row's release
  // notifies (LeaseDriver::mark_waiting); a free row is tried again at once.
  wait_mark,
  // Optional, where releases hand over and the waiter finds out with a statement (turn
  // grants, queue_ahead): (name, owner, ticket): frees a row a release handed to that ticket
  // (its waiter gave up before taking it); run after queue_leave, which the release's
  // deletion of the ticket comes before.
  handed_free,
  // Optional: (name, owner, ticket) -> (fence, remaining_ms) of the name's row when a release
  // handed it to that ticket (where releases hand over: the waiter holds it now), else (0, 0)
  // when a live ticket of another owner is lower, else no row. A waiter with a ticket asks
  // it first where a grant attempt costs more than a read (SQLite: every attempt takes the
  // database's one write lock).
  queue_ahead,
  // Optional, where a waiter learns of a hand-over from a message (PostgreSQL's NOTIFY):
  // (name, owner, fence) -> remaining_ms of the name's row when it is owner's at that fence
  // and live, else no row. The message is only a claim anyone who may NOTIFY can make; this
  // read is the database's word for it (LeaseDriver::take_handover).
  handed_check,
  sweep_queue,  // (batch): delete up to batch expired tickets; affected = deleted

  // In the caller's own transaction (sql/in_transaction.hpp), where the dialect offers it:
  // (name, key, wait_ms) -> fence > 0 when held until that transaction ends; 0 busy (held by
  // another transaction or a session lock past wait_ms); -ms busy (a lease, for ms more); no
  // row: busy, a lease (the holder statement says for how long).
  // key is the advisory strategy's (advisory_key()). The attempt leaves the transaction usable.
  lock_in,
  // (name, fence) -> a row when the lease with this fence is the current, unexpired holder,
  // which then stays so until the transaction ends; no row, or an error the adapter maps to
  // LockLostError, when not.
  check_in,

  // Operations on the table.
  // () -> name, owner, fence, holds, acquired_at_ms, valid_until_ms[, mode]: every live
  // holder, mode 'shared' for a reader (where shared holders exist)
  list,
  // The sweep deletes expired or free rows in batches, each batch a short transaction of its
  // own (SqlBackend::sweep), skipping rows someone holds locked rather than waiting for them.
  // Either one statement per batch:
  sweep,  // (batch): delete up to batch expired or free rows; affected = rows deleted
  // or, where `sweep` is not given (MySQL: no DELETE ... SKIP LOCKED, no DELETE from a table
  // the same statement selects from), two statements in one transaction:
  sweep_pick,    // (batch) -> names of up to batch expired rows, locked now
  sweep_delete,  // (names...): ${names} is a list of markers, one per name; deletes those
                 // rows, still only if expired; affected = rows deleted
  force_release,  // (name): delete the row if held; affected 1 or 0

  // Migration history, Flyway's columns, one history table per lock table.
  migration_lock,    // optional, (): serialises concurrent migrators, run first; a row with 0
                     // means the lock was not had in time
  migration_unlock,  // optional, (): run after migrating, when the lock outlives the transaction
  history_create,    // ()
  history_select,    // () -> version, script, checksum, success, installed_rank; by rank
  history_insert,    // (rank, version, description, script, checksum, installed_by, ms)
  // (): drops everything migrations/<name>/ made for the table. dblock never runs it; the
  // tests and the benchmark drop their scratch tables with it, so one place knows the list.
  drop_schema,
  count_  // not a statement: how many there are
};

// The ticket of a fair acquire that holds none yet (queue_join): above every real ticket.
constexpr std::int64_t no_ticket = std::numeric_limits<std::int64_t>::max();

struct Dialect {
  std::string name;                  // "sqlite": the migrations/<name>/ folder too
  std::vector<Strategy> strategies;  // the SQL strategies offered; the first is the default
  std::string now_ms;                // the expression ${now_ms} stands for
  char marker = '?';  // parameters are marker + number: ?1 (SQLite, MySQL), $1 (PostgreSQL)
  // The granularity of server-side lock waits: a wait is rounded down to it, and a wait
  // shorter than one unit becomes a try (the client's loop polls out the rest).
  std::chrono::milliseconds wait_unit{1};
  // Whether lock_in may sleep, inside the caller's transaction, until a lease on the name
  // expires. Not where that transaction keeps every writer out (SQLite): the holder could
  // not even release; nor where its snapshot would not see the lease go (MySQL's default
  // REPEATABLE READ). A lease in the way is then answered busy at once.
  bool in_transaction_waits_for_leases = true;
  // Whether lock_in may answer a lock without its fence (1, and a second column 0) for the
  // fence to be drawn with fence_next on a connection of a Client's (MySQL 8: the counter
  // cannot be raised inside the caller's transaction without every grant on the table
  // waiting for it; MariaDB answers the fence from its sequence in that second column).
  bool in_transaction_fence_apart = false;
  // Whether the lease releases answer, in their first column, the owner whose ticket is next
  // (NULL when none), for a notifier that wakes that owner alone (SQLite's wake files;
  // PostgreSQL's release names it in its NOTIFY instead).
  bool release_names_next = false;
  // Whether a waiter finds the row a release handed to its ticket with a statement of its
  // own, without writing (MySQL's turn keys' grants, SQLite's queue_ahead): a hand-over then needs
  // no message, only a wake-up.
  bool waiters_read_handed = false;
  // Whether the exclusive lease grants (insert_acquire, optimistic_take and MySQL's turn
  // keys' grants) and the queue's joins (queue_join: MySQL's mark the name's row) take one
  // parameter more, last: how long in ms they may wait for a lock on the name's row
  // (another transaction's: a caller's check_in or lock_in holds it to its commit). Past it
  // the server ends the statement (LockWaitTimeout) and the attempt answers busy, so that an
  // acquire waits no longer than its own deadline. Where not (SQLite), a grant waits for the
  // database's write lock up to the statement timeout.
  bool grant_waits_bounded = false;
  // At most this many rows per sweep batch, whatever the caller asks (0: no cap).
  std::size_t sweep_batch_max = 0;
  // A pause after each full sweep batch, for databases with one writer at a time (SQLite),
  // so that the writers that found a batch running (they poll, they do not queue) get in
  // before the next one.
  std::chrono::microseconds sweep_pause{0};
  // Reads the server settings the guarantees rely on (Client::check_settings, `dblock
  // doctor`) on one of dblock's sessions; sql/settings.hpp has one per database.
  std::vector<SettingCheck> (*settings)(Connection&) = nullptr;

  // Every statement's text, "" where the dialect does not give it. One array, so that
  // rendering and checking go over all of them and none can be left out.
  std::array<std::string, static_cast<std::size_t>(Statement::count_)> text;
  std::string& operator[](Statement s) { return text[static_cast<std::size_t>(s)]; }
  const std::string& operator[](Statement s) const { return text[static_cast<std::size_t>(s)]; }
  bool offers(Statement s) const { return !(*this)[s].empty(); }

  // Throws InternalError naming the statements this dialect must give and does not: every
  // one but the optional ones, the session statements only with their strategies, and
  // either sweep or both of sweep_pick and sweep_delete.
  void check() const;

  // A copy with the placeholders filled in for one table.
  Dialect rendered(const TableName& table) const;
};

// Fills ${table}, ${table_name} and ${now_ms} in a statement or migration script.
std::string render(std::string_view text, const TableName& table, std::string_view now_ms);

// `text` (sweep_delete) with ${names} replaced by n parameter markers: "?1, ?2, ..., ?n".
std::string with_markers(std::string_view text, std::size_t n, char marker);


}  // namespace dblock::detail::sqldb
