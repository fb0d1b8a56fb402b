// PostgreSQL's statement texts (the schema they work on, and why it is so:
// migrations/postgresql/V1__create_dblock_locks.sql). Each operation is one statement (one
// round trip): fences come from ${table}_fence_next (a sequence, whose nextval is not rolled
// back, so fences never repeat, even across a crash, with the server's timeline in its high
// bits, so they do not repeat across a promotion either) drawn while the name is held (see
// insert_acquire), and releases notify waiters in the same statement with pg_notify.
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
    // A holder's own release commits without waiting for its WAL flush (synchronous_commit
    // off for this statement's transaction only, set by set_config(..., true)); the waiters
    // are notified at the commit, so a hand-off costs one flush (the grant's), not two. No
    // guarantee depends on the release's flush: WAL is flushed in order, so the next grant's
    // commit, which saw the release, is durable only together with it. A crash can only lose
    // a release nobody built on yet, and then the row comes back held by its old owner until
    // its TTL: exactly a client that died before releasing. Grants, renewals, fences (the
    // sequence) and force_release stay synchronous.
    // The payload is the name and, after a newline, the owner whose ticket comes next (empty
    // when nobody queues): only that waiter is woken (PgListener). `freed` names the rows.
    const auto notify_async = [](const std::string& freed, const std::string& also = "") {
      return "SELECT pg_notify('dblock_${table}', " + freed + ".name || E'\\n' || COALESCE((SELECT q.owner FROM "
             "${table}_queue AS q WHERE q.name = " + freed + ".name AND q.valid_until > ${now_ms} "
             "ORDER BY q.ticket LIMIT 1), '')), set_config('synchronous_commit', 'off', true)" + also + " FROM " + freed;
    };

    // Fair waiting (${table}_queue): is a live ticket of another owner ahead of the asker's
    // (`ticket`: 0 unfair, so never; no_ticket, any)? And the winner's ticket goes with the
    // grant (a CTE; `won` is the grant's).
    const auto queued_ahead = [](const std::string& ticket) {
      return "EXISTS (SELECT 1 FROM ${table}_queue AS q WHERE q.name = $1 AND q.ticket < " + ticket +
             "::bigint AND q.owner <> $2 AND q.valid_until > ${now_ms})";
    };
    const auto served = [](const std::string& ticket) {
      return "served AS (DELETE FROM ${table}_queue WHERE name = $1 AND owner = $2 AND " + ticket +
             "::bigint BETWEEN 1 AND " + std::to_string(no_ticket - 1) + " AND EXISTS (SELECT 1 FROM won)) ";
    };

    d[S::holder] = "SELECT owner, valid_until - ${now_ms} FROM ${table} WHERE name = $1 AND valid_until > ${now_ms}";
    // now() is the transaction's start: a renewal that waited for the row lock extends from
    // before the wait, so by less than its TTL, as the core measures it too (from when it
    // sent the renewal). It may extend a row that expired during the wait: harmless, as the
    // blocker held the row and nobody could take it (docs/ARCHITECTURE.md).
    d[S::renew] =
        "UPDATE ${table} SET valid_until = GREATEST(valid_until, ${now_ms} + $4::bigint), holds = $5::integer, "
        "version = version + 1 "
        "WHERE name = $1 AND owner = $2 AND fence = $3::bigint AND valid_until > ${now_ms} "
        "RETURNING valid_until - ${now_ms}";
    // One statement, one commit for a Client's leases due at one tick: each row found by its
    // primary key, as renew's.
    d[S::renew_batch] =
        "UPDATE ${table} AS t SET valid_until = GREATEST(t.valid_until, ${now_ms} + (i.e->>3)::bigint), "
        "holds = (i.e->>4)::integer, version = t.version + 1 FROM json_array_elements($1::json) AS i(e) "
        "WHERE t.name = i.e->>0 AND t.owner = i.e->>1 AND t.fence = (i.e->>2)::bigint AND t.valid_until > ${now_ms} "
        "RETURNING t.name, t.fence, t.valid_until - ${now_ms}";

    // Who may grant a name, and in which order fences are drawn:
    // - nextval in VALUES would run before the conflict check, so two acquires could draw 41
    //   and 42 and be granted 42 first (the contract suite caught exactly this). Every grant
    //   of a name goes through this statement, and it draws the fence only while holding a
    //   transaction-scoped advisory lock on the name: draws and grants happen in one order.
    // - That lock is *tried*, not waited for, and only when the snapshot shows no live holder
    //   other than us. The waiters one release wakes all race here; the losers fail the
    //   try-lock and write nothing (a failed ON CONFLICT DO UPDATE would lock the row, which
    //   costs a transaction id and a WAL flush per loser), and go back to waiting for the
    //   next release.
    // - The row lock is waited for up to $5 ms (lock_timeout, set in the innermost subquery,
    //   SET LOCAL: it ends with this statement's transaction): another transaction holding
    //   the row (a caller's check_in or lock_in, to its commit) makes the attempt busy by the
    //   acquire's deadline instead of at the statement timeout (Dialect::grant_waits_bounded).
    // - An owner taking over its own leftover waits for that lock instead (an attempt holds
    //   it for one statement), so that it never fails because someone else just tried.
    // - A busy answer carries the holder's time left and name, from the same snapshot, so a
    //   waiter's attempt is one round trip (a writer behind readers learns it so, and marks
    //   the name: "Lock shapes").
    d[S::insert_acquire] =
        "WITH won AS (INSERT INTO ${table} AS t (name, owner, fence, holds, acquired_at, valid_until, version) "
        "SELECT $1, $2, ${table}_fence_next(), 1, ${now_ms}, ${now_ms} + $3::bigint, 1 "
        "FROM (SELECT set_config('lock_timeout', $5::bigint || 'ms', true)) AS bounded "
        "WHERE NOT EXISTS (SELECT 1 FROM ${table} AS live WHERE live.name = $1 AND live.valid_until > ${now_ms} "
        "AND live.owner <> $2) AND CASE WHEN EXISTS (SELECT 1 FROM ${table} AS mine WHERE mine.name = $1 "
        "AND mine.owner = $2 AND mine.valid_until > ${now_ms}) "
        "THEN (SELECT true FROM (SELECT pg_advisory_xact_lock(hashtextextended('${table}:' || $1, 0))) AS turn) "
        "WHEN " + queued_ahead("$4") + " THEN false "
        "ELSE pg_try_advisory_xact_lock(hashtextextended('${table}:' || $1, 0)) END "
        "ON CONFLICT (name) DO UPDATE SET fence = EXCLUDED.fence, holds = 1, acquired_at = EXCLUDED.acquired_at, "
        "valid_until = EXCLUDED.valid_until, owner = EXCLUDED.owner, version = t.version + 1 "
        "WHERE t.valid_until <= ${now_ms} OR (t.owner = EXCLUDED.owner AND t.holds > 0) "
        "RETURNING fence, valid_until - ${now_ms} AS remaining), " + served("$4") +
        "SELECT fence, remaining, '' FROM won UNION ALL "
        "SELECT 0, COALESCE(busy.valid_until - ${now_ms}, 0), COALESCE(busy.owner, '') "
        "FROM (SELECT 1) AS one LEFT JOIN ${table} AS busy ON busy.name = $1 "
        "WHERE NOT EXISTS (SELECT 1 FROM won)";
    // The release of a grant made after waiting: with a live ticket of another owner in the
    // name's queue, it grants the row to the lowest instead (a hand-over:
    // LeaseDriver::take_handover, confirmed by handed_check): new fence, the lease that waiter
    // asked for (its TTL, lease_ms: a hand-over survives a stall as well as any grant), the
    // ticket deleted, and the grant announced on the channel of hand-overs as
    // "FENCE LEASE_MS TICKET OWNER_BYTES OWNER NAME" (PgListener: one channel for every table,
    // as an owner names one Client of one table; the ticket says which of the owner's
    // acquires it was for). The ticket is deleted first (`taken`) and the row granted only
    // from what that DELETE returned: a waiter that gave up deleted its ticket first, or
    // waits for this commit and then frees the row handed to it (handed_free). Not to the
    // releaser's own ticket: a renewal crossing the hand-over that granted it writes it back.
    // It commits synchronously, as every grant does (its fence must not be lost in a crash).
    // It draws its fence without the name's turn lock: the row stays locked by this
    // statement from our grant to the head's, so no other grant of the name can draw
    // meanwhile. A release that finds no live ticket frees the row as before (`free`, the
    // strategy's: nobody queues, so its notification names nobody next), and answers `also`
    // besides; a hand-over answers `handed_also` (-1: the last column says it handed over).
    // It also deletes any ticket of the releaser's own (`stale`): an owner is one thread of
    // one Client, so a ticket of ours while we hold the name is a renewal that crossed the
    // hand-over that granted it to us (its snapshot predated that commit, so queue_join's
    // guard did not see the row ours). Left, it would put a waiter nobody is in the line
    // ahead of every later one, and the next hand-over would grant it the row.
    const auto releasing = [&](const std::string& free, const std::string& also, const std::string& handed_also) {
      return "WITH head AS (SELECT q.owner, q.ticket FROM ${table}_queue AS q WHERE q.name = $1 "
             "AND q.owner <> $2 AND q.valid_until > ${now_ms} AND EXISTS (SELECT 1 FROM ${table} AS o "
             "WHERE o.name = $1 AND o.owner = $2 AND o.fence = $3::bigint) ORDER BY q.ticket LIMIT 1), "
             "taken AS (DELETE FROM ${table}_queue AS q USING head WHERE q.name = $1 AND q.owner = head.owner "
             "AND q.ticket = head.ticket RETURNING q.owner, q.ticket, q.lease_ms), "
             "handed AS (UPDATE ${table} AS t SET owner = taken.owner, fence = ${table}_fence_next(), holds = 1, "
             "acquired_at = ${now_ms}, valid_until = ${now_ms} + taken.lease_ms, version = t.version + 1 "
             "FROM taken WHERE t.name = $1 AND t.owner = $2 AND t.fence = $3::bigint "
             "RETURNING t.name, t.owner, t.fence, taken.lease_ms, taken.ticket), "
             "stale AS (DELETE FROM ${table}_queue AS q WHERE q.name = $1 AND q.owner = $2), "
             "freed AS (" + free + " WHERE name = $1 AND owner = $2 AND fence = $3::bigint "
             "AND NOT EXISTS (SELECT 1 FROM taken) RETURNING name, version) "
             "SELECT pg_notify('dblock_${table}', freed.name || E'\\n'), set_config('synchronous_commit', 'off', true)" +
             also + " FROM freed UNION ALL SELECT pg_notify('dblock handed', handed.fence || ' ' || handed.lease_ms "
             "|| ' ' || handed.ticket || ' ' || octet_length(handed.owner) || ' ' || handed.owner || handed.name), "
             "NULL" + handed_also + " FROM handed";
    };
    d[S::insert_release] =
        "WITH gone AS (DELETE FROM ${table} WHERE name = $1 AND owner = $2 AND fence = $3::bigint "
        "RETURNING name) " + notify_async("gone");
    d[S::insert_handover] = releasing("DELETE FROM ${table}", ", 0::bigint", ", -1::bigint");
    d[S::handed_check] =
        "SELECT valid_until - ${now_ms} FROM ${table} WHERE name = $1 AND owner = $2 AND fence = $3::bigint "
        "AND valid_until > ${now_ms}";

    d[S::release_after] =
        "UPDATE ${table} SET valid_until = ${now_ms} + $4::bigint, holds = 0, version = version + 1 "
        "WHERE name = $1 AND owner = $2 AND fence = $3::bigint AND valid_until > ${now_ms}";

    d[S::optimistic_read] = "SELECT owner, version, valid_until - ${now_ms} FROM ${table} WHERE name = $1";
    // The waiters one release wakes all read the same free version and race to take it. An
    // UPDATE that loses that race waits for the winner's row lock and then locks the row
    // itself to recheck it, which costs it a transaction id and a WAL flush at commit (1.5
    // extra WAL syncs per grant with 8 waiters). So the take first tries the same
    // transaction-scoped advisory lock as insert_acquire (CASE: only on a row that still
    // looks free), and a loser writes nothing. It also answers in the same round trip
    // instead of making the driver read again: fence 0 and the holder's time left (busy), 0
    // when someone else is taking the row right now (busy: their release will notify), or
    // -1 when the row is free and nobody holds the turn (the version moved: read again).
    // The row lock is waited for up to $6 ms, as in insert_acquire.
    d[S::optimistic_take] =
        "WITH won AS (UPDATE ${table} SET owner = $2, fence = ${table}_fence_next(), holds = 1, "
        "acquired_at = ${now_ms}, valid_until = ${now_ms} + $3::bigint, version = version + 1 "
        "FROM (SELECT set_config('lock_timeout', $6::bigint || 'ms', true)) AS bounded "
        "WHERE name = $1 AND CASE WHEN version <> $4::bigint OR valid_until > ${now_ms} THEN false "
        "WHEN " + queued_ahead("$5") + " THEN false "
        "ELSE pg_try_advisory_xact_lock(hashtextextended('${table}:' || $1, 0)) END "
        "RETURNING fence, valid_until - ${now_ms} AS remaining), " + served("$5") +
        "SELECT fence, remaining, '' FROM won UNION ALL "
        "SELECT 0, CASE WHEN busy.valid_until > ${now_ms} THEN busy.valid_until - ${now_ms} "
        "WHEN " + queued_ahead("$5") + " THEN 0 "
        "WHEN pg_try_advisory_xact_lock(hashtextextended('${table}:' || $1, 0)) THEN -1 ELSE 0 END, "
        "COALESCE(busy.owner, '') FROM (SELECT 1) AS one LEFT JOIN ${table} AS busy ON busy.name = $1 "
        "WHERE NOT EXISTS (SELECT 1 FROM won)";
    // A freed row expires now, not at 0: the sweeper picks rows in valid_until order, and
    // rows at 0 came first in every batch, locked until its DELETE under the next grant of a
    // name in use.
    d[S::optimistic_release] =
        "WITH freed AS (UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = version + 1 "
        "WHERE name = $1 AND owner = $2 AND fence = $3::bigint RETURNING name, version) " +
        notify_async("freed", ", freed.version");
    // Its last column, the version the release left, is -1 where it handed the row over.
    d[S::optimistic_handover] =
        releasing("UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = version + 1",
                  ", freed.version", ", -1::bigint");

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

    // Fair waiting. A ticket is the server's clock in us when the waiter first
    // joined; a renewal writes its own ticket back, so even a swept one keeps its place. A
    // renewal after a release handed the row to its owner (and deleted the ticket) is not
    // written back: the ticket would outlive the acquire it was for, holding up other
    // owners' grants for its life. It answers no row then, and the waiter keeps its ticket
    // for the hand-over's message or a grant that takes the row as its own leftover. (A
    // renewal whose snapshot predates the release's commit still writes it back.)
    d[S::queue_join] =
        "INSERT INTO ${table}_queue AS q (name, owner, ticket, valid_until, lease_ms) SELECT $1, $2, "
        "CASE WHEN $4::bigint = 0 THEN (extract(epoch from clock_timestamp()) * 1000000)::bigint ELSE $4::bigint END, "
        "${now_ms} + $3::bigint, $5::bigint FROM (SELECT set_config('lock_timeout', $6::bigint || 'ms', true)) AS bounded "
        "WHERE $4::bigint = 0 OR NOT EXISTS (SELECT 1 FROM ${table} AS t WHERE t.name = $1 "
        "AND t.owner = $2 AND t.holds > 0 AND t.valid_until > ${now_ms}) "
        "ON CONFLICT (name, owner) DO UPDATE SET ticket = EXCLUDED.ticket, "
        "valid_until = EXCLUDED.valid_until, lease_ms = EXCLUDED.lease_ms RETURNING ticket";
    // A waiter that gives up wakes the next one, who may be free to go now.
    d[S::queue_leave] =
        "WITH gone AS (DELETE FROM ${table}_queue WHERE name = $1 AND owner = $2 RETURNING name) " + notify_async("gone");
    // After queue_leave, which found the ticket gone if a hand-over took it (and waited for
    // that commit): a row still ours is one handed to us as we gave up, its message not yet
    // read. Our owner (one thread of one Client) holds nothing else of the name while it
    // waits for it, so the owner alone names that row; the ticket is not stored in it here.
    // Freed as the optimistic release frees (the insert grant takes over an expired row).
    d[S::handed_free] =
        "WITH freed AS (UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = version + 1 "
        "WHERE name = $1 AND owner = $2 AND holds > 0 AND $3::bigint <> 0 RETURNING name) " + notify_async("freed");
    d[S::sweep_queue] =
        "DELETE FROM ${table}_queue WHERE (name, owner) = ANY(ARRAY(SELECT (name, owner) FROM ${table}_queue "
        "WHERE valid_until <= ${now_ms} LIMIT $1::bigint FOR UPDATE SKIP LOCKED))";

    // A function (${table}_lock_in): each attempt is one round trip, and a busy one leaves the
    // caller's transaction usable (the function's exception block is a subtransaction).
    d[S::lock_in] = "SELECT ${table}_lock_in($1, $2::bigint, $3::bigint)";
    // ${table}_check's own statement, without the PL/pgSQL call (about half the check's cost):
    // no row means not held, which the driver reports.
    d[S::check_in] =
        "SELECT fence FROM ${table} WHERE name = $1 AND fence = $2::bigint AND holds > 0 "
        "AND valid_until > (extract(epoch from clock_timestamp()) * 1000)::bigint FOR SHARE";

    d[S::list] =
        "SELECT name, owner, fence, holds, acquired_at, valid_until, 'exclusive' FROM ${table} "
        "WHERE valid_until > ${now_ms} AND owner NOT LIKE ':%' UNION ALL "
        "SELECT h.name, h.owner, h.fence, h.holds, h.acquired_at, h.valid_until, "
        "CASE h.mode WHEN 's' THEN 'shared' ELSE 'exclusive' END FROM ${table}_holders AS h JOIN ${table} AS t "
        "ON t.name = h.name AND t.owner LIKE ':%' AND t.valid_until > ${now_ms} "
        "WHERE h.mode <> 'w' AND h.valid_until > ${now_ms} ORDER BY 1, 3";
    // SKIP LOCKED: a row being taken over right now is not worth waiting for. The picked names
    // go through ARRAY(...), an InitPlan run once, so the DELETE finds them by primary key:
    // written `name IN (SELECT ...)` the planner hash-joined the subquery with a sequential
    // scan of the whole table, every batch (105 ms per 1000 rows out of 200k, against 10 ms).
    // The picked rows stay locked until the DELETE: no one can have taken them over.
    d[S::sweep] =
        "DELETE FROM ${table} WHERE name = ANY(ARRAY(SELECT name FROM ${table} WHERE valid_until <= ${now_ms} "
        "LIMIT $1::bigint FOR UPDATE SKIP LOCKED))";
    // The name's row first, then its holders (the order every shaped statement locks them in).
    d[S::force_release] =
        "WITH gone AS (DELETE FROM ${table} WHERE name = $1 AND valid_until > ${now_ms} RETURNING name), "
        "holders AS (DELETE FROM ${table}_holders WHERE name IN (SELECT name FROM gone)) " + notify + "gone";

    d[S::migration_lock] = "SELECT pg_advisory_xact_lock(hashtext('dblock migrate ${table}'))";
    d[S::drop_schema] =
        "DROP TABLE IF EXISTS ${table}, ${table}_holders, ${table}_queue, ${table}_schema_history; "
        "DROP SEQUENCE IF EXISTS ${table}_fence; "
        "DROP FUNCTION IF EXISTS ${table}_lock_in(text, bigint, bigint), ${table}_check(text, bigint), "
        "${table}_acquire_shared(text, text, text, integer, bigint), ${table}_release_shared(text, text, bigint), "
        "${table}_fence_next()";
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
