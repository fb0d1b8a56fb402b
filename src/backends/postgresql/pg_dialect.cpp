// PostgreSQL's statement texts (the schema they work on, and why it is so:
// migrations/postgresql/V1__create_dblock_locks.sql). Each operation is one statement (one
// round trip): fences come from ${table}_fence_next (a sequence, whose nextval is not rolled
// back, so fences never repeat, even across a crash, with the server's timeline in its high
// bits, so they do not repeat across a promotion either) drawn while the name is held (see
// ${table}_insert_acquire), and releases notify waiters in the same statement with pg_notify.
// ${now_ms} is the server's clock at the start of the statement.
#include "backends/postgresql/pg_dialect.hpp"

namespace dblock::detail::sqldb {

const Dialect& postgresql_dialect() {
  static const Dialect d = [] {
    using S = Statement;
    Dialect d;
    d.name = "postgresql";
    d.marker = '$';
    d.grant_waits_bounded = true;
    d.strategies = {Strategy::insert, Strategy::optimistic, Strategy::for_update, Strategy::advisory};
    d.now_ms = "(extract(epoch from now()) * 1000)::bigint";
    const std::string notify = "SELECT pg_notify('dblock_${table}', name || E'\\n') FROM ";
    // A waiter's leaving frees nothing anyone built on: it commits without waiting for its
    // WAL flush, as a release does (${table}_release says why), and names the next waiter.
    const auto notify_async = [](const std::string& freed) {
      return "SELECT pg_notify('dblock_${table}', " + freed + ".name || E'\\n' || COALESCE((SELECT q.owner FROM "
             "${table}_queue AS q WHERE q.name = " + freed + ".name AND q.valid_until > ${now_ms} "
             "ORDER BY q.ticket LIMIT 1), '')), set_config('synchronous_commit', 'off', true) FROM " + freed;
    };

    // ${until:t}: a row is held until its own valid_until or its Client row's (dialect.hpp).
    d[S::holder] =
        "SELECT t.owner, ${until:t} - ${now_ms} FROM ${table} AS t WHERE t.name = $1 AND ${until:t} > ${now_ms}";
    // now() is the transaction's start: a renewal that waited for the row lock extends from
    // before the wait, so by less than its TTL, as the core measures it too (from when it
    // sent the renewal). It may extend a row that expired during the wait: harmless, as the
    // blocker held the row and nobody could take it (docs/ARCHITECTURE.md).
    d[S::renew] =
        "UPDATE ${table} AS t SET valid_until = GREATEST(t.valid_until, ${now_ms} + $4::bigint), holds = $5::integer, "
        "version = t.version + 1 "
        "WHERE t.name = $1 AND t.owner = $2 AND t.fence = $3::bigint AND ${until:t} > ${now_ms} "
        "RETURNING ${until:t} - ${now_ms}";
    // One statement, one commit for a Client's leases due at one tick: each row found by its
    // primary key, as renew's, and attached to the Client's row, which renews it from then on.
    d[S::renew_batch] =
        "UPDATE ${table} AS t SET valid_until = GREATEST(t.valid_until, ${now_ms} + (i.e->>3)::bigint), "
        "holds = (i.e->>4)::integer, version = t.version + 1, client = NULLIF(i.e->>5, '') "
        "FROM json_array_elements($1::json) AS i(e) "
        "WHERE t.name = i.e->>0 AND t.owner = i.e->>1 AND t.fence = (i.e->>2)::bigint AND ${until:t} > ${now_ms} "
        "RETURNING t.name, t.fence, t.valid_until - ${now_ms}";
    // A Client row is a few dozen bytes of WAL per tick for all of the Client's leases of its
    // TTL (the read of the leases that name it writes nothing).
    d[S::client_create] = "INSERT INTO ${table}_clients (id, valid_until) VALUES ($1, ${now_ms} + $2::bigint)";
    d[S::client_renew] =
        "WITH c AS (UPDATE ${table}_clients AS c SET valid_until = GREATEST(c.valid_until, ${now_ms} + $2::bigint) "
        "WHERE c.id = $1 AND c.valid_until > ${now_ms} RETURNING c.valid_until - ${now_ms} AS remaining) "
        "SELECT COALESCE(t.name, ''), COALESCE(t.fence, 0), c.remaining FROM c LEFT JOIN ${table} AS t "
        "ON t.client = $1";
    d[S::client_detach] =
        "UPDATE ${table} SET client = NULL, version = version + 1 WHERE name = $2 AND fence = $3::bigint AND client = $1";

    // The hot statements of the lease strategies are functions of the migration, whose plans the
    // server keeps (a statement sent as text through a transaction pooler is planned at every
    // call); what each does, and why, is said there.
    d[S::insert_acquire] =
        "SELECT fence, remaining, holder FROM ${table}_insert_acquire($1, $2, $3::bigint, $4::bigint, $5::bigint)";
    d[S::insert_release] = "SELECT * FROM ${table}_release($1, $2, $3::bigint, false, false)";
    // The uncontended path (the migration's "waiters' mark"): a name with no row has nobody
    // waiting (a waiter marks the row it finds, and a marked row is freed, not deleted), so
    // its grant is the least a fenced lease grant sends, as one statement the server keeps
    // planned: the row created under the name's turn, with its fence. A name with a row (held,
    // marked, kept, a leftover) is left to insert_acquire, and draws no fence here: the test
    // of the row comes before the draw. The release deletes a row nobody marked, committed
    // without waiting for its flush, as ${table}_release's, and notifies nobody.
    d[S::insert_acquire_unmarked] =
        "INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) "
        "SELECT $1, $2, ${table}_fence_next(), 1, ${now_ms}, ${now_ms} + $3::bigint, 1 "
        "WHERE NOT EXISTS (SELECT 1 FROM ${table} AS x WHERE x.name = $1) "
        "AND pg_try_advisory_xact_lock(hashtextextended('${table}:' || $1, 0)) "
        "ON CONFLICT (name) DO NOTHING RETURNING fence, valid_until - ${now_ms}";
    d[S::insert_release_unmarked] =
        "WITH d AS (DELETE FROM ${table} AS t WHERE t.name = $1 AND t.owner = $2 AND t.fence = $3::bigint "
        "AND t.waited_until <= ${now_ms} RETURNING t.fence) "
        "SELECT 0::bigint, set_config('synchronous_commit', 'off', true) FROM d";
    // Committed without waiting for its flush (a mark is worth nothing after a crash: its
    // waiter's session is gone; flushed, the 8 waiters of a hand-off each added a WAL flush
    // to every turn, 1.25-1.76x the hand-off floor instead of 1.2).
    // NOWAIT: a caller's transaction may hold the row (check_in's share lock) for as long as it
    // runs; the waiter then polls (LeaseDriver::mark_waiting) instead of waiting for it.
    // The answer is the row's time left: a free row (an optimistic one, freed unmarked since
    // the busy answer, so without a notification) is tried again at once.
    d[S::wait_mark] =
        "WITH r AS (SELECT name FROM ${table} WHERE name = $1 FOR NO KEY UPDATE NOWAIT), "
        "m AS (UPDATE ${table} AS t SET waited_until = GREATEST(t.waited_until, ${now_ms} + $2::bigint) FROM r "
        "WHERE t.name = r.name RETURNING ${until:t} - ${now_ms} AS left_ms) "
        "SELECT m.left_ms, set_config('synchronous_commit', 'off', true) FROM m";
    d[S::insert_handover] = "SELECT * FROM ${table}_release($1, $2, $3::bigint, false, true)";
    d[S::handed_check] =
        "SELECT ${until:t} - ${now_ms} FROM ${table} AS t WHERE t.name = $1 AND t.owner = $2 AND t.fence = $3::bigint "
        "AND ${until:t} > ${now_ms}";

    // Kept for keep_ms from now by its own time alone: not by the Client row any more.
    d[S::release_after] =
        "UPDATE ${table} AS t SET valid_until = ${now_ms} + $4::bigint, holds = 0, version = t.version + 1, "
        "client = NULL WHERE t.name = $1 AND t.owner = $2 AND t.fence = $3::bigint AND ${until:t} > ${now_ms}";

    d[S::optimistic_read] = "SELECT t.owner, t.version, ${until:t} - ${now_ms} FROM ${table} AS t WHERE t.name = $1";
    d[S::optimistic_take] = "SELECT fence, remaining, holder FROM ${table}_optimistic_take($1, $2, $3::bigint, "
                            "$4::bigint, $5::bigint, $6::bigint)";
    // The version the release left is the answer's last column (-1: handed over).
    d[S::optimistic_release] = "SELECT * FROM ${table}_release($1, $2, $3::bigint, true, false)";
    // The uncontended path, as insert's above: the compare-and-set of a free row nobody
    // marked, under the name's turn, as one statement; and the release of an unmarked row,
    // its new version last, committed without waiting for its flush. A row another
    // transaction locks (a caller's check_in of a lease that expired meanwhile) is skipped,
    // not waited for: ${table}_optimistic_take bounds that wait.
    d[S::optimistic_take_unmarked] =
        "WITH r AS (SELECT t.name FROM ${table} AS t WHERE t.name = $1 AND t.version = $4::bigint "
        "AND t.waited_until <= ${now_ms} AND ${until:t} <= ${now_ms} "
        "AND pg_try_advisory_xact_lock(hashtextextended('${table}:' || $1, 0)) FOR NO KEY UPDATE OF t SKIP LOCKED) "
        "UPDATE ${table} AS t SET owner = $2, fence = ${table}_fence_next(), holds = 1, acquired_at = ${now_ms}, "
        "valid_until = ${now_ms} + $3::bigint, version = t.version + 1, client = NULL FROM r WHERE t.name = r.name "
        "RETURNING t.fence, t.valid_until - ${now_ms}";
    d[S::optimistic_release_unmarked] =
        "WITH u AS (UPDATE ${table} AS t SET owner = '', holds = 0, valid_until = ${now_ms}, version = t.version + 1, "
        "client = NULL WHERE t.name = $1 AND t.owner = $2 AND t.fence = $3::bigint AND t.waited_until <= ${now_ms} "
        "RETURNING t.version) SELECT set_config('synchronous_commit', 'off', true), u.version FROM u";
    d[S::optimistic_handover] = "SELECT * FROM ${table}_release($1, $2, $3::bigint, true, true)";

    // set_config(..., true) is SET LOCAL: it ends with the transaction. The statement
    // timeout is lifted past the lock wait, which lock_timeout bounds.
    d[S::session_wait] =
        "SELECT set_config('lock_timeout', $1::bigint || 'ms', true), "
        "set_config('statement_timeout', ($1::bigint + 5000) || 'ms', true)";
    d[S::ping] = "SELECT 1";
    // Only while nobody holds the name's turn (a transaction's lock_in holds it throughout;
    // an insert acquire for one statement): the row lock_in inserted is not committed yet,
    // and inserting it again would wait for that transaction instead of answering busy.
    d[S::for_update_create] =
        "INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) "
        "SELECT $1, '', 0, 0, ${now_ms}, 0, 0 WHERE pg_try_advisory_xact_lock(hashtextextended('${table}:' || $1, 0)) "
        "ON CONFLICT (name) DO NOTHING";
    // The fence is not drawn here but by fence_next on another connection (see dialect.hpp):
    // a nextval in this transaction, which stays open while the lock is held, was lost by a
    // crash and granted again (tests/faults: "postgresql crash").
    // The locks answer their transaction's id, which fence_next_held checks after its draw.
    d[S::for_update_try] = "SELECT txid_current() FROM ${table} WHERE name = $1 FOR UPDATE NOWAIT";
    d[S::for_update_wait] = "SELECT txid_current() FROM ${table} WHERE name = $1 FOR UPDATE";
    d[S::fence_next] = "SELECT ${table}_fence_next()";
    // A transaction is marked ended before its locks are let go (xact.c does so for commit
    // and abort alike), so a locking transaction still in progress after the draw held the
    // row throughout it: the next holder's draw comes later. The draw is in a subquery that
    // is not flattened (OFFSET 0), so it runs before the check in the outer CASE; the answer
    // is NULL when the locking transaction had ended (its connection killed).
    d[S::fence_next_held] =
        "SELECT CASE WHEN txid_status($1::bigint) = 'in progress' THEN drawn.fence END "
        "FROM (SELECT ${table}_fence_next() AS fence OFFSET 0) AS drawn";
    // CASE evaluates the lock first and draws a fence only when it was won.
    d[S::advisory_try] = "SELECT CASE WHEN pg_try_advisory_lock($1::bigint) THEN ${table}_fence_next() ELSE 0 END";
    d[S::advisory_wait] = "SELECT ${table}_fence_next() FROM (SELECT pg_advisory_lock($1::bigint)) AS locked";
    d[S::advisory_unlock] = "SELECT pg_advisory_unlock($1::bigint)";
    // The same wait in one statement: the innermost subquery sets lock_timeout (SET LOCAL,
    // so it ends with this statement's own transaction) before the lock is asked for; the
    // subqueries contain volatile functions, so they are not flattened and run inside out.
    // A waiter woken by the unlock then has its fence in the same round trip (the old form
    // needed BEGIN, set_config and the lock before the wait, and a COMMIT after it).
    d[S::advisory_wait_bounded] =
        "SELECT ${table}_fence_next() FROM (SELECT pg_advisory_lock($1::bigint) FROM "
        "(SELECT set_config('lock_timeout', $2::bigint || 'ms', true)) AS bounded) AS locked";

    // Readers: PostgreSQL's lock manager queues a shared request behind a waiting exclusive
    // one (a writer waiting inside the server), so writers are not starved by new readers.
    d[S::advisory_try_shared] =
        "SELECT CASE WHEN pg_try_advisory_lock_shared($1::bigint) THEN ${table}_fence_next() ELSE 0 END";
    d[S::advisory_wait_shared] =
        "SELECT ${table}_fence_next() FROM (SELECT pg_advisory_lock_shared($1::bigint)) AS locked";
    d[S::advisory_unlock_shared] = "SELECT pg_advisory_unlock_shared($1::bigint)";
    d[S::advisory_wait_bounded_shared] =
        "SELECT ${table}_fence_next() FROM (SELECT pg_advisory_lock_shared($1::bigint) FROM "
        "(SELECT set_config('lock_timeout', $2::bigint || 'ms', true)) AS bounded) AS locked";

    // Read/write locks and semaphores (${table}_holders): the grant and the release lock the
    // name's row first and then read in fresh snapshots, which takes a function; renewals
    // and the rest are single statements that touch the name's row first, so they queue
    // behind a grant or release under way instead of reading around it.
    d[S::shared_acquire] = "SELECT fence, remaining FROM ${table}_acquire_shared($1, $2, $3, $4::integer, $5::bigint)";
    const std::string holder_live =
        "EXISTS (SELECT 1 FROM ${table}_holders AS h WHERE h.name = $1 AND h.owner = $2 AND h.fence = $3::bigint "
        "AND h.mode <> 'w' AND h.valid_until > ${now_ms})";
    d[S::shared_renew] =
        "WITH named AS (UPDATE ${table} AS t SET valid_until = GREATEST(t.valid_until, ${now_ms} + $4::bigint), "
        "version = t.version + 1 WHERE t.name = $1 AND t.owner LIKE ':%' AND t.valid_until > ${now_ms} AND " +
        holder_live + " RETURNING 1) "
        "UPDATE ${table}_holders AS h SET valid_until = GREATEST(h.valid_until, ${now_ms} + $4::bigint), "
        "holds = $5::integer WHERE h.name = $1 AND h.owner = $2 AND h.fence = $3::bigint AND h.mode <> 'w' "
        "AND EXISTS (SELECT 1 FROM named) RETURNING h.valid_until - ${now_ms}";
    d[S::shared_release] = "SELECT 1 FROM ${table}_release_shared($1, $2, $3::bigint) AS freed WHERE freed";
    d[S::shared_release_after] =
        "WITH named AS (UPDATE ${table} AS t SET valid_until = GREATEST(t.valid_until, ${now_ms} + $4::bigint), "
        "version = t.version + 1 WHERE t.name = $1 AND t.owner LIKE ':%' AND t.valid_until > ${now_ms} AND " +
        holder_live + " RETURNING 1) "
        "UPDATE ${table}_holders AS h SET valid_until = ${now_ms} + $4::bigint, holds = 0 "
        "WHERE h.name = $1 AND h.owner = $2 AND h.fence = $3::bigint AND h.mode <> 'w' "
        "AND EXISTS (SELECT 1 FROM named)";
    d[S::writer_mark] =
        "INSERT INTO ${table}_holders AS h (name, owner, mode, permits, fence, holds, acquired_at, valid_until) "
        "SELECT $1, $2, 'w', 0, 0, 0, ${now_ms}, ${now_ms} + $3::bigint WHERE EXISTS (SELECT 1 FROM ${table} AS t "
        "WHERE t.name = $1 AND t.owner = ':readers' AND t.valid_until > ${now_ms}) "
        "ON CONFLICT (name, owner) DO UPDATE SET mode = 'w', permits = 0, fence = 0, holds = 0, "
        "valid_until = EXCLUDED.valid_until";
    d[S::writer_unmark] = "DELETE FROM ${table}_holders WHERE name = $1 AND owner = $2 AND mode = 'w'";
    d[S::sweep_holders] =
        "DELETE FROM ${table}_holders WHERE (name, owner) = ANY(ARRAY(SELECT (name, owner) FROM ${table}_holders "
        "WHERE valid_until <= ${now_ms} LIMIT $1::bigint FOR UPDATE SKIP LOCKED))";

    // Fair waiting (${table}_queue_join says how a ticket is taken and renewed).
    d[S::queue_join] =
        "SELECT * FROM ${table}_queue_join($1, $2, $3::bigint, $4::bigint, $5::bigint, $6::bigint)";
    // A waiter that gives up wakes the next one, who may be free to go now.
    d[S::queue_leave] =
        "WITH gone AS (DELETE FROM ${table}_queue WHERE name = $1 AND owner = $2 RETURNING name) " + notify_async("gone");
    // After queue_leave, which found the ticket gone if a hand-over took it (and waited for
    // that commit): a row still ours is one handed to us as we gave up, its message not yet
    // read. Our owner (one thread of one Client) holds nothing else of the name while it
    // waits for it, so the owner alone names that row; the ticket is not stored in it here.
    // Freed as the optimistic release frees (the insert grant takes over an expired row).
    d[S::handed_free] =
        "WITH freed AS (UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = version + 1, "
        "client = NULL WHERE name = $1 AND owner = $2 AND holds > 0 AND $3::bigint <> 0 RETURNING name) " +
        notify_async("freed");
    d[S::sweep_queue] =
        "DELETE FROM ${table}_queue WHERE (name, owner) = ANY(ARRAY(SELECT (name, owner) FROM ${table}_queue "
        "WHERE valid_until <= ${now_ms} LIMIT $1::bigint FOR UPDATE SKIP LOCKED))";

    // A function (${table}_lock_in): each attempt is one round trip, and a busy one leaves the
    // caller's transaction usable (the function's exception block is a subtransaction).
    d[S::lock_in] = "SELECT ${table}_lock_in($1, $2::bigint, $3::bigint)";
    // ${table}_check's own statement, without the PL/pgSQL call (about half the check's cost):
    // no row means not held, which the driver reports.
    d[S::check_in] =
        "SELECT t.fence FROM ${table} AS t WHERE t.name = $1 AND t.fence = $2::bigint AND t.holds > 0 "
        "AND ${until:t} > (extract(epoch from clock_timestamp()) * 1000)::bigint FOR SHARE OF t";

    d[S::list] =
        "SELECT x.name, x.owner, x.fence, x.holds, x.acquired_at, ${until:x}, 'exclusive' FROM ${table} AS x "
        "WHERE ${until:x} > ${now_ms} AND x.owner NOT LIKE ':%' UNION ALL "
        "SELECT h.name, h.owner, h.fence, h.holds, h.acquired_at, h.valid_until, "
        "CASE h.mode WHEN 's' THEN 'shared' ELSE 'exclusive' END FROM ${table}_holders AS h JOIN ${table} AS t "
        "ON t.name = h.name AND t.owner LIKE ':%' AND t.valid_until > ${now_ms} "
        "WHERE h.mode <> 'w' AND h.valid_until > ${now_ms} ORDER BY 1, 3";
    // SKIP LOCKED: a row being taken over right now is not worth waiting for. The picked names
    // go through ARRAY(...), an InitPlan run once, so the DELETE finds them by primary key:
    // written `name IN (SELECT ...)` the planner hash-joined the subquery with a sequential
    // scan of the whole table, every batch (105 ms per 1000 rows out of 200k, against 10 ms).
    // The picked rows stay locked until the DELETE: no one can have taken them over. A row
    // past its own time may be kept by its Client row (the index finds the first, the filter
    // the second); expired Client rows go in the same statement (an expired one is never
    // extended again, so nothing it named needs it).
    d[S::sweep] =
        "WITH clients AS (DELETE FROM ${table}_clients WHERE id = ANY(ARRAY(SELECT id FROM ${table}_clients "
        "WHERE valid_until <= ${now_ms} LIMIT $1::bigint FOR UPDATE SKIP LOCKED))) "
        "DELETE FROM ${table} WHERE name = ANY(ARRAY(SELECT t.name FROM ${table} AS t WHERE t.valid_until <= ${now_ms} "
        "AND ${until:t} <= ${now_ms} AND t.waited_until <= ${now_ms} LIMIT $1::bigint FOR UPDATE OF t SKIP LOCKED))";
    // The name's row first, then its holders (the order every shaped statement locks them in).
    d[S::force_release] =
        "WITH gone AS (DELETE FROM ${table} AS t WHERE t.name = $1 AND ${until:t} > ${now_ms} RETURNING t.name), "
        "holders AS (DELETE FROM ${table}_holders WHERE name IN (SELECT name FROM gone)) " + notify + "gone";

    d[S::migration_lock] = "SELECT pg_advisory_xact_lock(hashtext('dblock migrate ${table}'))";
    d[S::drop_schema] =
        "DROP TABLE IF EXISTS ${table}, ${table}_holders, ${table}_queue, ${table}_clients, ${table}_schema_history; "
        "DROP SEQUENCE IF EXISTS ${table}_fence; "
        "DROP FUNCTION IF EXISTS ${table}_lock_in(text, bigint, bigint), ${table}_check(text, bigint), "
        "${table}_acquire_shared(text, text, text, integer, bigint), ${table}_release_shared(text, text, bigint), "
        "${table}_fence_next(), ${table}_insert_acquire(text, text, bigint, bigint, bigint), "
        "${table}_optimistic_take(text, text, bigint, bigint, bigint, bigint), "
        "${table}_release(text, text, bigint, boolean, boolean), "
        "${table}_queue_join(text, text, bigint, bigint, bigint, bigint)";
    d[S::history_create] =
        "CREATE TABLE IF NOT EXISTS ${table}_schema_history ("
        "installed_rank integer NOT NULL PRIMARY KEY, version varchar(50), description varchar(200) NOT NULL, "
        "type varchar(20) NOT NULL, script varchar(1000) NOT NULL, checksum integer, "
        "installed_by varchar(100) NOT NULL, installed_on timestamp NOT NULL DEFAULT now(), "
        "execution_time integer NOT NULL, success boolean NOT NULL)";
    d[S::history_select] =
        "SELECT version, script, checksum, CASE WHEN success THEN 1 ELSE 0 END, installed_rank "
        "FROM ${table}_schema_history ORDER BY installed_rank";
    d[S::history_insert] =
        "INSERT INTO ${table}_schema_history (installed_rank, version, description, type, script, checksum, "
        "installed_by, execution_time, success) VALUES ($1::integer, $2, $3, 'SQL', $4, $5::integer, $6, "
        "$7::integer, true)";
    d.settings = postgresql_settings;
    d.check();
    return d;
  }();
  return d;
}

}  // namespace dblock::detail::sqldb
