// SQLite's statement texts. Every statement is one atomic write; the fence counter is
// advanced by triggers on the lock table (migrations/sqlite/V1__...), so an acquire stays a
// single statement. ${now_ms} is SQLite's clock, which is this host's.
#include "backends/sqlite/sqlite_dialect.hpp"

namespace dblock::detail::sqldb {

const Dialect& sqlite_dialect() {
  static const Dialect d = [] {
    using S = Statement;
    Dialect d;
    d.name = "sqlite";
    d.strategies = {Strategy::insert, Strategy::optimistic};
    // julianday('now') is fixed for the whole statement, so every use agrees.
    d.now_ms = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

    const auto queued_ahead = [](const std::string& ticket) {
      return "EXISTS (SELECT 1 FROM ${table}_queue AS q WHERE q.name = ?1 AND q.ticket < " + ticket +
             " AND q.owner <> ?2 AND q.valid_until > ${now_ms})";
    };

    d[S::holder] = "SELECT owner, valid_until - ${now_ms} FROM ${table} WHERE name = ?1 AND valid_until > ${now_ms}";
    d[S::renew] =
        "UPDATE ${table} SET valid_until = MAX(valid_until, ${now_ms} + ?4), holds = ?5, version = version + 1 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND valid_until > ${now_ms} "
        "RETURNING valid_until - ${now_ms}";
    // renew for a Client's leases due at one tick, in one write transaction.
    d[S::renew_batch] =
        "UPDATE ${table} AS t SET valid_until = MAX(t.valid_until, ${now_ms} + i.ttl), holds = i.holds, "
        "version = t.version + 1 FROM (SELECT value ->> 0 AS name, value ->> 1 AS owner, value ->> 2 AS fence, "
        "value ->> 3 AS ttl, value ->> 4 AS holds FROM json_each(?1)) AS i "
        "WHERE t.name = i.name AND t.owner = i.owner AND t.fence = i.fence AND t.valid_until > ${now_ms} "
        "RETURNING name, fence, valid_until - ${now_ms}";

    // Free, expired, or a leftover of our own: a new grant with the next fence. Anyone
    // else's, or ours kept after its release (holds 0): no row.
    // Fair waiting (${table}_queue): no grant while a live ticket of another owner is lower than
    // the asker's (?4; 0 asks unfairly), except of a leftover of the asker's own; the grant's
    // triggers delete the winner's ticket.
    // The condition makes the fence NULL, which fails its NOT NULL: OR IGNORE then drops the
    // row, inserted or upserted (the DO UPDATE checks it too). As INSERT ... SELECT ... WHERE,
    // SQLite ran the SELECT into a temporary table first (it does for a table with triggers),
    // which cost as much CPU as the rest of the grant.
    d[S::insert_acquire] =
        "INSERT OR IGNORE INTO ${table} AS t (name, owner, fence, holds, acquired_at, valid_until, version) "
        "VALUES (?1, ?2, CASE WHEN NOT " + queued_ahead("?4") + " OR EXISTS (SELECT 1 FROM ${table} AS mine "
        "WHERE mine.name = ?1 AND mine.owner = ?2 AND mine.valid_until > ${now_ms}) "
        "THEN (SELECT value + 1 FROM ${table}_fence) END, 1, ${now_ms}, ${now_ms} + ?3, 1) "
        "ON CONFLICT (name) DO UPDATE SET fence = excluded.fence, holds = 1, acquired_at = excluded.acquired_at, "
        "valid_until = excluded.valid_until, owner = excluded.owner, version = t.version + 1 "
        "WHERE excluded.fence IS NOT NULL AND (t.valid_until <= ${now_ms} OR (t.owner = excluded.owner AND t.holds > 0)) "
        "RETURNING fence, valid_until - ${now_ms}";
    // A release answers whose ticket is next, and the wake files wake that waiter alone
    // (the others would each read the queue and wait again). min() picks that ticket's row
    // (SQLite's bare column beside one min() comes from the row where it was found): an
    // ORDER BY ... LIMIT 1 starts SQLite's sorter, whose buffer made every release 60-70 us
    // slower, uncontended or not.
    const std::string next_owner =
        "(SELECT owner FROM (SELECT q.owner, min(q.ticket) FROM ${table}_queue AS q WHERE q.name = ?1 "
        "AND q.valid_until > ${now_ms}))";
    d.release_names_next = true;
    // Reached only when insert_release_unmarked did not delete our row: it is marked, so it is
    // freed and kept (the mark must outlive the release), and the waiter next in line is named.
    d[S::insert_release] =
        "UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = version + 1, handed_to = 0 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 RETURNING " + next_owner;
    // The uncontended path (the migration's "waiters' mark"): a name with no row has nobody
    // waiting (a waiter marks the row it finds, and a marked row is freed, not deleted), so
    // its grant is the least a fenced lease grant sends: no look at the queue. A name with a
    // row (held, marked, kept, a leftover) is left to insert_acquire. The release deletes a
    // row nobody marked and wakes nobody; it has no RETURNING (SQLite buffers a RETURNING's
    // rows in a temporary table, which its statement opens a transaction on: the next
    // waiter's name cost every release that much).
    d[S::insert_acquire_unmarked] =
        "INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) "
        "VALUES (?1, ?2, (SELECT value + 1 FROM ${table}_fence), 1, ${now_ms}, ${now_ms} + ?3, 1) "
        "ON CONFLICT (name) DO NOTHING RETURNING fence, valid_until - ${now_ms}";
    d[S::insert_release_unmarked] =
        "DELETE FROM ${table} WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND waited_until <= ${now_ms}";
    // Committed with synchronous=NORMAL (LeaseDriver::mark_waiting): a mark is worth nothing
    // after a crash, its waiter being gone.
    d[S::wait_mark] =
        "UPDATE ${table} SET waited_until = MAX(waited_until, ${now_ms} + ?2) WHERE name = ?1 RETURNING 1";

    d[S::release_after] =
        "UPDATE ${table} SET valid_until = ${now_ms} + ?4, holds = 0, version = version + 1 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND valid_until > ${now_ms}";

    d[S::optimistic_read] = "SELECT owner, version, valid_until - ${now_ms} FROM ${table} WHERE name = ?1";
    d[S::optimistic_take] =
        "UPDATE ${table} SET owner = ?2, fence = (SELECT value + 1 FROM ${table}_fence), holds = 1, "
        "acquired_at = ${now_ms}, valid_until = ${now_ms} + ?3, version = version + 1 "
        "WHERE name = ?1 AND version = ?4 AND valid_until <= ${now_ms} AND NOT " + queued_ahead("?5") +
        " RETURNING fence, valid_until - ${now_ms}";
    d[S::optimistic_release] =
        "UPDATE ${table} SET owner = '', holds = 0, valid_until = 0, version = version + 1 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 RETURNING " + next_owner + ", version";
    // The hand-over: the release of a grant made after waiting names the lowest live ticket
    // of another owner (`head`, one row, NULLs when there is none) as the row's owner, with
    // the next fence, the lease that waiter asked for and the ticket in handed_to; the
    // queue's trigger deletes that ticket. Answers the owner to wake (the head; NULL when the
    // row was freed) and the freed row's version, or -1 when handed over. Both strategies keep
    // the freed row (the sweeper deletes it; insert's grant takes over an expired row). The
    // other columns of min()'s query come from the row with that minimum (SQLite's rule).
    const std::string head =
        "(SELECT q.owner AS next_owner, min(q.ticket) AS next_ticket, q.lease_ms AS next_lease "
        "FROM ${table}_queue AS q WHERE q.name = ?1 AND q.owner <> ?2 AND q.valid_until > ${now_ms})";
    d[S::insert_handover] =
        "UPDATE ${table} AS t SET owner = COALESCE(h.next_owner, ''), "
        "fence = CASE WHEN h.next_ticket IS NULL THEN t.fence ELSE (SELECT value + 1 FROM ${table}_fence) END, "
        "holds = h.next_ticket IS NOT NULL, acquired_at = ${now_ms}, "
        "valid_until = CASE WHEN h.next_ticket IS NULL THEN ${now_ms} ELSE ${now_ms} + h.next_lease END, "
        "version = t.version + 1, handed_to = COALESCE(h.next_ticket, 0) FROM " + head + " AS h "
        "WHERE t.name = ?1 AND t.owner = ?2 AND t.fence = ?3 "
        "RETURNING NULLIF(owner, ''), CASE WHEN handed_to = 0 THEN version ELSE -1 END";
    d[S::optimistic_handover] = d[S::insert_handover];
    d.waiters_read_handed = true;
    d[S::handed_free] =
        "UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = version + 1, handed_to = 0 "
        "WHERE name = ?1 AND owner = ?2 AND handed_to = ?3 AND holds > 0";

    d[S::list] =
        "SELECT name, owner, fence, holds, acquired_at, valid_until, 'exclusive' FROM ${table} "
        "WHERE valid_until > ${now_ms} AND owner NOT LIKE ':%' UNION ALL "
        "SELECT h.name, h.owner, h.fence, h.holds, h.acquired_at, h.valid_until, "
        "CASE h.mode WHEN 's' THEN 'shared' ELSE 'exclusive' END FROM ${table}_holders AS h JOIN ${table} AS t "
        "ON t.name = h.name AND t.owner LIKE ':%' AND t.valid_until > ${now_ms} "
        "WHERE h.mode <> 'w' AND h.valid_until > ${now_ms} ORDER BY 1, 3";
    d[S::sweep] =
        "DELETE FROM ${table} WHERE name IN "
        "(SELECT name FROM ${table} WHERE valid_until <= ${now_ms} AND waited_until <= ${now_ms} LIMIT ?1)";
    d[S::force_release] = "DELETE FROM ${table} WHERE name = ?1 AND valid_until > ${now_ms}";
    // One writer at a time: a sweep batch holds the database's write lock for its DELETE and
    // commit, and the acquirers that find it taken poll (SqliteConnection's busy handler) rather
    // than queue. So a batch is at most 500 rows (a few ms) and the sweep pauses 10 ms after
    // each, several of the busy handler's polls, so that whoever found the batch running gets
    // in next (the measurements behind both numbers: docs/ARCHITECTURE.md, "Sweeping").
    d.sweep_batch_max = 500;
    d.sweep_pause = std::chrono::milliseconds(10);

    // Read/write locks and semaphores (${table}_holders): one statement each, whose triggers
    // keep the name's row in step (one writer at a time: nothing can come between them).
    // A grant: no live exclusive holder, no live holder that disagrees about the name's
    // shape, for a reader no writer's mark, for a semaphore fewer than N others; the owner's
    // own leftover is replaced. No row: shared_busy says why.
    const std::string live = "valid_until > ${now_ms}";
    // As the insert grant, the conditions decide whether the fence is NULL (no row).
    d[S::shared_acquire] =
        "INSERT OR IGNORE INTO ${table}_holders AS h (name, owner, mode, permits, fence, holds, acquired_at, "
        "valid_until) VALUES (?1, ?2, ?3, ?4, CASE WHEN "
        "NOT EXISTS (SELECT 1 FROM ${table} WHERE name = ?1 AND owner NOT LIKE ':%' AND " + live + ") "
        "AND NOT EXISTS (SELECT 1 FROM ${table}_holders WHERE name = ?1 AND owner <> ?2 AND " + live +
        " AND (mode = 'w' AND ?3 = 's' OR mode <> 'w' AND (mode <> ?3 OR permits <> ?4))) "
        "AND (?3 = 's' OR (SELECT count(*) FROM ${table}_holders WHERE name = ?1 AND owner <> ?2 AND mode = 'x' "
        "AND " + live + ") < ?4) THEN (SELECT value + 1 FROM ${table}_fence) END, 1, ${now_ms}, ${now_ms} + ?5) "
        "ON CONFLICT (name, owner) DO UPDATE SET mode = excluded.mode, permits = excluded.permits, "
        "fence = excluded.fence, holds = 1, acquired_at = excluded.acquired_at, valid_until = excluded.valid_until "
        "WHERE excluded.fence IS NOT NULL RETURNING fence, valid_until - ${now_ms}";
    d[S::shared_busy] =
        "SELECT code, remaining FROM ("
        "SELECT 1 AS k, CASE WHEN ?3 = 'x' THEN -3 ELSE 0 END AS code, valid_until - ${now_ms} AS remaining "
        "FROM ${table} WHERE name = ?1 AND owner NOT LIKE ':%' AND " + live + " UNION ALL "
        "SELECT 2, CASE mode WHEN 'x' THEN -1 ELSE -2 END, permits FROM ${table}_holders WHERE name = ?1 "
        "AND owner <> ?2 AND mode <> 'w' AND " + live + " AND (mode <> ?3 OR permits <> ?4) UNION ALL "
        "SELECT 3, 0, min(valid_until) - ${now_ms} FROM ${table}_holders WHERE name = ?1 AND owner <> ?2 "
        "AND " + live + " AND (mode = 'w' AND ?3 = 's' OR mode = 'x' AND ?3 = 'x') "
        "HAVING count(*) > 0 UNION ALL SELECT 4, 0, 0) ORDER BY k LIMIT 1";
    d[S::shared_renew] =
        "UPDATE ${table}_holders SET valid_until = MAX(valid_until, ${now_ms} + ?4), holds = ?5 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND mode <> 'w' AND " + live +
        " RETURNING valid_until - ${now_ms}";
    d[S::shared_release] = "DELETE FROM ${table}_holders WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND mode <> 'w'";
    d[S::shared_release_after] =
        "UPDATE ${table}_holders SET valid_until = ${now_ms} + ?4, holds = 0 "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3 AND mode <> 'w' AND " + live;
    d[S::writer_mark] =
        "INSERT INTO ${table}_holders AS h (name, owner, mode, permits, fence, holds, acquired_at, valid_until) "
        "SELECT ?1, ?2, 'w', 0, 0, 0, ${now_ms}, ${now_ms} + ?3 WHERE EXISTS (SELECT 1 FROM ${table} "
        "WHERE name = ?1 AND owner = ':readers' AND " + live + ") "
        "ON CONFLICT (name, owner) DO UPDATE SET mode = 'w', permits = 0, fence = 0, holds = 0, "
        "valid_until = excluded.valid_until";
    d[S::writer_unmark] = "DELETE FROM ${table}_holders WHERE name = ?1 AND owner = ?2 AND mode = 'w'";
    d[S::sweep_holders] =
        "DELETE FROM ${table}_holders WHERE rowid IN "
        "(SELECT rowid FROM ${table}_holders WHERE valid_until <= ${now_ms} LIMIT ?1)";

    // Fair waiting. One writer at a time, so a new ticket is simply above the name's highest
    // (and above the clock, so that a queue swept empty does not start again below a ticket
    // still held by a waiter); a renewal writes its own ticket back, unless a release has
    // just handed the row to it (no row then, and the waiter's next read takes the row). A waiter reads first (queue_ahead): the row handed to its ticket, or
    // whether a ticket is ahead.
    d[S::queue_join] =
        "INSERT INTO ${table}_queue (name, owner, ticket, valid_until, lease_ms) SELECT ?1, ?2, CASE WHEN ?4 = 0 THEN "
        "MAX(${now_ms}, (SELECT COALESCE(MAX(ticket), 0) + 1 FROM ${table}_queue WHERE name = ?1)) ELSE ?4 END, "
        "${now_ms} + ?3, ?5 WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE name = ?1 AND owner = ?2 AND handed_to = ?4 "
        "AND ?4 <> 0 AND holds > 0) ON CONFLICT (name, owner) DO UPDATE SET ticket = excluded.ticket, "
        "valid_until = excluded.valid_until, lease_ms = excluded.lease_ms RETURNING ticket";
    d[S::queue_leave] = "DELETE FROM ${table}_queue WHERE name = ?1 AND owner = ?2";
    d[S::queue_ahead] =
        "SELECT fence, valid_until - ${now_ms} FROM ${table} WHERE name = ?1 AND owner = ?2 AND handed_to = ?3 "
        "AND holds > 0 AND valid_until > ${now_ms} UNION ALL SELECT 0, 0 WHERE " + queued_ahead("?3") + " LIMIT 1";
    d[S::sweep_queue] =
        "DELETE FROM ${table}_queue WHERE rowid IN "
        "(SELECT rowid FROM ${table}_queue WHERE valid_until <= ${now_ms} LIMIT ?1)";

    // In the caller's write transaction (dblock/sqlite.hpp), which keeps every other writer
    // out until it ends: the lock is that transaction itself, given a fence unless a lease
    // holds the name (busy: no row). Nothing to wait on, so the advisory key and the wait
    // (?2, ?3) are bound and unused.
    d.in_transaction_waits_for_leases = false;
    d[S::lock_in] =
        "UPDATE ${table}_fence SET value = value + 1 WHERE id = 1 AND coalesce(?2, ?3) IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM ${table} WHERE name = ?1 AND valid_until > ${now_ms}) RETURNING value";
    // The rule of the ${table}_check trigger, as an UPDATE that changes nothing:
    // it makes the transaction the writer first, so no takeover commits before it ends.
    d[S::check_in] =
        "UPDATE ${table} SET fence = fence WHERE name = ?1 AND fence = ?2 AND holds > 0 AND valid_until > ${now_ms} "
        "RETURNING fence";

    d[S::drop_schema] =
        "DROP TABLE IF EXISTS ${table}; DROP TABLE IF EXISTS ${table}_holders; DROP TABLE IF EXISTS ${table}_queue; DROP TABLE IF EXISTS ${table}_fence; DROP TABLE IF EXISTS ${table}_schema_history; "
        "DROP TABLE IF EXISTS ${table}_check";
    d[S::history_create] =
        "CREATE TABLE IF NOT EXISTS ${table}_schema_history ("
        "installed_rank INTEGER NOT NULL PRIMARY KEY, version TEXT, description TEXT NOT NULL, "
        "type TEXT NOT NULL, script TEXT NOT NULL, checksum INTEGER, installed_by TEXT NOT NULL, "
        "installed_on TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), "
        "execution_time INTEGER NOT NULL, success INTEGER NOT NULL)";
    d[S::history_select] =
        "SELECT version, script, checksum, success, installed_rank FROM ${table}_schema_history ORDER BY installed_rank";
    d[S::history_insert] =
        "INSERT INTO ${table}_schema_history (installed_rank, version, description, type, script, "
        "checksum, installed_by, execution_time, success) VALUES (?1, ?2, ?3, 'SQL', ?4, ?5, ?6, ?7, 1)";
    d.settings = sqlite_settings;
    d.check();
    return d;
  }();
  return d;
}

}  // namespace dblock::detail::sqldb
