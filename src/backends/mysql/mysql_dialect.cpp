// MySQL's and MariaDB's statement texts (one text for both, MySQL 8 and MariaDB 10.11: where
// they spell a statement differently, a procedure of the migration picks the spelling).
//
// MySQL has no RETURNING, so an operation that must write and report is several statements
// in one text, sent in one round trip (see MySqlConnection), or, for the operations sent
// most, a stored procedure (migrations/mysql/V1__create_dblock_locks.sql says what each does
// and why). Parameters are ?1, ?2, ... spliced in as literals. Fences come from a SEQUENCE on
// MariaDB (${table}_fence_seq, drawn once the name is held) and on MySQL 8, which has none,
// from the one-row ${table}_fence counter, bumped with LAST_INSERT_ID(expr), which hands the
// new value to this connection alone; there a session lock draws from blocks of that counter
// reserved ahead (${table}_fence_cache). The procedures choose where they run.
// ${now_ms} is the server's clock (UTC_TIMESTAMP: no time zone or DST in play), constant
// within one statement.
#include "backends/mysql/mysql_dialect.hpp"

namespace dblock::detail::sqldb {

namespace {

Dialect make() {
  {
    using S = Statement;
    Dialect d;
    d.name = "mysql";
    d.strategies = {Strategy::insert, Strategy::optimistic, Strategy::for_update, Strategy::advisory};
    d.now_ms = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";
    // GET_LOCK and innodb_lock_wait_timeout count whole seconds; shorter waits are polled.
    d.wait_unit = std::chrono::milliseconds{1000};

    // ${until:t}: a row is held until its own valid_until or its Client row's (dialect.hpp).
    // A row that names no Client row has client '' here, not NULL (fixed width: naming one
    // updates the row in place; migrations/mysql/V1__create_dblock_locks.sql), which
    // ${until:t} reads the same: no such Client row, the row's own time.
    // Shaped rows (owner ':readers', ':semaphore') and the holders' and queue's rows never name
    // a Client row: their own valid_until is theirs.
    d[S::holder] =
        "SELECT t.owner, ${until:t} - ${now_ms} FROM ${table} AS t WHERE t.name = ?1 AND ${until:t} > ${now_ms}";
    // ROW_COUNT() is the previous statement's count: whether the UPDATE matched.
    d[S::renew] =
        "UPDATE ${table} AS t SET valid_until = GREATEST(t.valid_until, ${now_ms} + ?4), holds = ?5, "
        "version = t.version + 1 WHERE t.name = ?1 AND t.owner = ?2 AND t.fence = ?3 AND ${until:t} > ${now_ms}; "
        "SET @dblock_won = ROW_COUNT(); "
        "SELECT ${until:t} - ${now_ms} FROM ${table} AS t WHERE t.name = ?1 AND @dblock_won = 1";
    // renew for a Client's leases due at one tick: one UPDATE (one commit) joined to the items,
    // each row found by its primary key, and attached to the Client's row (the 6th element),
    // which renews it from then on; then the rows that are ours and live, as renewed, with
    // the time they are held for. A row's own valid_until is left alone when the Client row
    // it comes to name lasts at least 9/10 of the TTL from now already (just created or
    // renewed this tick: the row is then renewed as the Client's others are): the change to
    // the valid_until index, and its purge, were over half of an attach's redo log.
    // The items' client is typed as the Client row's key: InnoDB reads the tables of a
    // multi-table UPDATE's subqueries with share locks even under READ COMMITTED, and a
    // VARCHAR of another character set could not use the key, so each renewal scanned every
    // Client's row and waited for every other Client's tick (the full-size crowd run lost
    // whole Clients' leases that way).
    const std::string items =
        "JSON_TABLE(?1, '$[*]' COLUMNS (name VARCHAR(255) PATH '$[0]', owner VARCHAR(512) PATH '$[1]', "
        "fence BIGINT PATH '$[2]', ttl BIGINT PATH '$[3]', holds INT PATH '$[4]', "
        "client CHAR(32) CHARACTER SET ascii COLLATE ascii_bin PATH '$[5]')) "
        "AS i ON t.name = i.name AND t.owner = i.owner AND t.fence = i.fence";
    d[S::renew_batch] =
        "UPDATE ${table} AS t JOIN " + items +
        " SET t.valid_until = IF(IFNULL((SELECT c.valid_until FROM ${table}_clients AS c WHERE c.id = i.client), 0) "
        ">= ${now_ms} + i.ttl - i.ttl DIV 10, t.valid_until, GREATEST(t.valid_until, ${now_ms} + i.ttl)), "
        "t.holds = i.holds, t.version = t.version + 1, t.client = IFNULL(i.client, '') WHERE ${until:t} > ${now_ms}; "
        "SELECT t.name, t.fence, ${until:t} - ${now_ms} FROM ${table} AS t JOIN " + items +
        " WHERE ${until:t} > ${now_ms}";
    // A Client row: one row written per tick for all of the Client's leases of its TTL (the
    // read of the leases that name it writes nothing). It is extended only while still valid;
    // the answer's test of its time, rather than ROW_COUNT(), tells whether it was (an
    // extension that changed nothing, GREATEST keeping the row's time, counts no row), and
    // its one row with name '' stands for a Client row that keeps no lease.
    d[S::client_create] = "INSERT INTO ${table}_clients (id, valid_until) VALUES (?1, ${now_ms} + ?2)";
    d[S::client_detach] =
        "UPDATE ${table} SET client = '', version = version + 1 WHERE name = ?2 AND fence = ?3 AND client = ?1";
    d[S::client_renew] =
        "UPDATE ${table}_clients SET valid_until = GREATEST(valid_until, ${now_ms} + ?2) "
        "WHERE id = ?1 AND valid_until > ${now_ms}; "
        "SELECT COALESCE(t.name, ''), COALESCE(t.fence, 0), c.valid_until - ${now_ms} FROM ${table}_clients AS c "
        "LEFT JOIN ${table} AS t ON t.client = c.id WHERE c.id = ?1 AND c.valid_until > ${now_ms}";

    // The two lease acquires are stored procedures (${table}_lease_grant and _lease_take,
    // where their logic is explained): as texts of six statements each, parsing alone cost
    // about 300 us per acquire. Each answers one result set.
    // Fair waiting: the grants take the asker's ticket (see
    // Statement::queue_join) and delete it when they win; they read the queue only on a row
    // that a waiter marked (waited_until). A release frees the row rather than deleting it,
    // so that the mark outlives it while someone waits; the sweeper removes free rows. A
    // freed row expires now, not at 0: the sweeper picks rows in valid_until order, and rows
    // at 0 came first in every batch, whose locks then held up the next grants of names in
    // use (acquirers 8-9x slower during a sweep of 200k rows, BENCHMARKS).
    // A grant waits for a lock on the name's row (another transaction's: a caller's check_in
    // or lock_in, to its commit) up to its last parameter, in ms (Dialect::grant_waits_bounded),
    // counted in InnoDB's whole seconds, at least one: the text sets the session's
    // innodb_lock_wait_timeout around the CALL and puts it back after (MySqlConnection::run
    // does so when the CALL fails). Past it the CALL fails with 1205 and the attempt is busy.
    const auto row_wait = mysql_row_wait;
    d.grant_waits_bounded = true;
    d[S::insert_acquire] = row_wait("CALL ${table}_lease_grant(?1, ?2, ?3, ?4)", "?5");
    d[S::insert_release] =
        "UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = version + 1, client = '' "
        "WHERE name = ?1 AND owner = ?2 AND fence = ?3";

    // Kept for keep_ms from now by its own time alone: not by the Client row any more.
    d[S::release_after] =
        "UPDATE ${table} AS t SET valid_until = ${now_ms} + ?4, holds = 0, version = t.version + 1, client = '' "
        "WHERE t.name = ?1 AND t.owner = ?2 AND t.fence = ?3 AND ${until:t} > ${now_ms}";

    d[S::optimistic_read] = "SELECT t.owner, t.version, ${until:t} - ${now_ms} FROM ${table} AS t WHERE t.name = ?1";
    d[S::optimistic_take] = row_wait("CALL ${table}_lease_take(?1, ?2, ?3, ?4, ?5)", "?6");
    // Answers the version it left (LAST_INSERT_ID(expr) remembers expr for this session, as
    // the fence draws do), so that this Client's next acquire of the name can try the
    // compare-and-set at once instead of reading first (OptimisticDriver's hint).
    d[S::optimistic_release] =
        "UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = LAST_INSERT_ID(version + 1), "
        "client = '' WHERE name = ?1 AND owner = ?2 AND fence = ?3; "
        "SELECT LAST_INSERT_ID() FROM DUAL WHERE ROW_COUNT() >= 1";
    // The hand-over (${table}_lease_release): the release of a grant made after waiting grants a marked
    // row to the lowest live ticket's owner (a new fence, the TTL that waiter asked for, the
    // ticket deleted, its number in handed_to), whose turn key the same text lets go; that
    // waiter's turn grant answers the row handed to its ticket without writing. Answers the
    // freed row's version, or -1.
    d[S::insert_handover] = "CALL ${table}_lease_release(?1, ?2, ?3)";
    d[S::optimistic_handover] = d[S::insert_handover];
    d.waiters_read_handed = true;

    // Read/write locks and semaphores (${table}_holders): the grant, release, renewal and keep
    // are procedures that lock the name's row first (the last two one procedure); the mark
    // and the sweep single statements.
    d[S::shared_acquire] = "CALL ${table}_acquire_shared(?1, ?2, ?3, ?4, ?5)";
    d[S::shared_renew] = "CALL ${table}_extend_shared(?1, ?2, ?3, ?4, ?5, 0)";
    d[S::shared_release] = "CALL ${table}_release_shared(?1, ?2, ?3)";
    d[S::shared_release_after] = "CALL ${table}_extend_shared(?1, ?2, ?3, ?4, 0, 1)";
    d[S::writer_mark] =
        "INSERT INTO ${table}_holders (name, owner, mode, permits, fence, holds, acquired_at, valid_until) "
        "SELECT ?1, ?2, 'w', 0, 0, 0, ${now_ms}, ${now_ms} + ?3 FROM DUAL WHERE EXISTS (SELECT 1 FROM ${table} "
        "WHERE name = ?1 AND owner = ':readers' AND valid_until > ${now_ms}) "
        "ON DUPLICATE KEY UPDATE mode = 'w', permits = 0, fence = 0, holds = 0, valid_until = ${now_ms} + ?3";
    d[S::writer_unmark] = "DELETE FROM ${table}_holders WHERE name = ?1 AND owner = ?2 AND mode = 'w'";
    d[S::sweep_holders] = "DELETE FROM ${table}_holders WHERE valid_until <= ${now_ms} LIMIT ?1";

    // Fair waiting (${table}_queue): a ticket is the server's clock in us when the waiter first
    // joined; a renewal writes its own ticket back, so even a swept one keeps its place.
    // The name's row is marked (waited_until) in the same transaction, first, so that a grant
    // which finds it unmarked finds no ticket either. The mark covers twice a ticket's life
    // and is written only when less than one is left (or, creating a free row, when there
    // is no row): a write would hold the row locked through the join's commit, and the
    // grant of the waiter a release just woke would wait for that flush. Under READ
    // COMMITTED the UPDATE reads a row it does not change without locking it, and the
    // INSERT's NOT EXISTS is a read without locks too. A ticket a release has just handed the
    // row to (the release deleted it) is not written back, and the answer is then no row:
    // the waiter's next grant takes the row. A procedure, which the server parses once a
    // session instead of once a join.
    d[S::queue_join] = row_wait("CALL ${table}_queue_join(?1, ?2, ?3, ?4, ?5)", "?6");  // its mark waits as a grant
    d[S::queue_leave] = "DELETE FROM ${table}_queue WHERE name = ?1 AND owner = ?2";
    // A row handed to the ticket after its waiter gave up is freed after the ticket goes: a
    // release handing it over deletes the ticket first, so queue_leave's DELETE waits for that
    // release's commit, and this UPDATE then sees the row it handed.
    d[S::handed_free] =
        "UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, version = version + 1, handed_to = 0, "
        "client = '' WHERE name = ?1 AND owner = ?2 AND handed_to = ?3 AND holds > 0";
    d[S::sweep_queue] = "DELETE FROM ${table}_queue WHERE valid_until <= ${now_ms} LIMIT ?1";
    // The turn keys' statements are theirs (mysql_turn_keys.cpp).

    // Session strategies. The wait bound goes to both mechanisms (a user variable for
    // GET_LOCK, the session's row-lock timeout for FOR UPDATE), in whole seconds.
    d[S::session_wait] = "SET @dblock_wait = ?1 DIV 1000, SESSION innodb_lock_wait_timeout = GREATEST(1, ?1 DIV 1000)";
    d[S::ping] = "SELECT 1";
    d[S::for_update_create] =
        "INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) "
        "VALUES (?1, '', 0, 0, ${now_ms}, 0, 0) ON DUPLICATE KEY UPDATE name = name";
    // The row lock is the open transaction, so on MySQL 8 its fence cannot come from the
    // counter in that transaction (the counter row would stay locked for the whole hold): it
    // is drawn on another connection once the row is locked. Session locks draw with
    // ${table}_fence_draw: the sequence's next on MariaDB, on MySQL 8 from a block of the
    // counter reserved ahead, so that a grant does not wait for a redo log flush (the fence
    // was a session lock's only write).
    d[S::for_update_try] = "SELECT 1 FROM ${table} WHERE name = ?1 FOR UPDATE NOWAIT";
    d[S::for_update_wait] = "SELECT 1 FROM ${table} WHERE name = ?1 FOR UPDATE";
    // Readers: InnoDB queues a share lock behind a waiting exclusive one, so a waiting writer
    // keeps new readers out (checked on MariaDB 10.11: "once a writer waits..." in the shape
    // contract). The try needs NOWAIT, which the two servers spell differently: a procedure
    // (${table}_try_share) picks the spelling where it runs.
    d[S::for_update_try_shared] = "CALL ${table}_try_share(?1)";
    d[S::for_update_wait_shared] = "SELECT 1 FROM ${table} WHERE name = ?1 LOCK IN SHARE MODE";
    d[S::fence_next] = "CALL ${table}_fence_draw(1)";
    // In the caller's transaction (dblock/mysql.hpp): ${table}_lock_in locks the row and, on
    // MariaDB, answers its fence from the sequence; on MySQL 8 the fence is drawn apart with
    // fence_next, as for the for-update strategy. The check is
    // ${table}_check without the CALL: a share lock on the row, kept until the end.
    d.in_transaction_fence_apart = true;
    d.in_transaction_waits_for_leases = false;
    d[S::lock_in] = "CALL ${table}_lock_in(?1, ?2, ?3)";
    d[S::check_in] =
        "SELECT t.fence FROM ${table} AS t WHERE t.name = ?1 AND t.fence = ?2 AND t.holds > 0 "
        "AND ${until:t} > ${now_ms} LOCK IN SHARE MODE";
    // GET_LOCK names are server-wide, at most 64 characters and case-insensitive: the key
    // is "dblock:" and the 16 hex digits of advisory_key(<database>.<table>, name).
    // GET_LOCK is not transactional, so the fence is drawn after it, in the same text; the
    // procedure answers 0 when GET_LOCK did not answer 1.
    const std::string lock_name = "CONCAT('dblock:', LPAD(HEX(?1), 16, '0'))";
    // A text whose CALL was a deadlock victim is sent again whole (MySqlConnection::run), and
    // GET_LOCK counts per session: taken twice, one RELEASE_LOCK would leave it held. A session
    // holding the name already (only such a repeat: the session is one Client's, whose threads
    // take a name one at a time) answers 1 without taking it again. A session holds many
    // names (AdvisoryDriver shares it), so the unlock frees this one only.
    const auto get_lock = [&](const std::string& timeout) {
      return "SET @dblock_got = IF(IS_USED_LOCK(" + lock_name + ") <=> CONNECTION_ID(), 1, GET_LOCK(" + lock_name +
             ", " + timeout + ")); CALL ${table}_fence_draw(@dblock_got)";
    };
    d[S::advisory_try] = get_lock("0");
    d[S::advisory_wait] = get_lock("@dblock_wait");
    // A wait shorter than the statement timeout in one text, outside a transaction: no SET
    // before it and no COMMIT after the grant, which a woken waiter waited for (the hand-off
    // floor sends just this text). GET_LOCK's timeout is whole seconds (wait_unit); one that
    // runs out answers 0, and the driver waits on in the next piece.
    d[S::advisory_wait_bounded] = get_lock("?2 DIV 1000");
    d[S::advisory_unlock] = "DO RELEASE_LOCK(" + lock_name + ")";

    d[S::list] =
        "SELECT x.name, x.owner, x.fence, x.holds, x.acquired_at, ${until:x}, 'exclusive' FROM ${table} AS x "
        "WHERE ${until:x} > ${now_ms} AND x.owner NOT LIKE ':%' UNION ALL "
        "SELECT h.name, h.owner, h.fence, h.holds, h.acquired_at, h.valid_until, "
        "IF(h.mode = 's', 'shared', 'exclusive') FROM ${table}_holders AS h JOIN ${table} AS t "
        "ON t.name = h.name AND t.owner LIKE ':%' AND t.valid_until > ${now_ms} "
        "WHERE h.mode <> 'w' AND h.valid_until > ${now_ms} ORDER BY 1, 3";
    // MySQL cannot DELETE ... SKIP LOCKED, nor delete from a table it selects from: a batch
    // picks expired rows that nobody holds locked right now (a for-update row stays locked
    // for a whole hold), then deletes them by primary key in one statement, and commits.
    // The DELETE checks expiry again, although the rows are locked since the pick (no one
    // can have taken them over): a live lease is never swept. At most 1000 names per
    // DELETE: each is spliced in as a hex literal (up to 512 bytes), which must stay well
    // under max_allowed_packet.
    // A free row marked by a waiter stays (waited_until): it says the name has a queue. A row
    // past its own time may be kept by its Client row (the index finds the first, the filter
    // the second; the subquery's Client row is read without a lock). Expired Client rows go
    // with each pick, first (an expired one is never extended again, so nothing it named
    // needs it: a row naming a missing Client row is held by its own time alone).
    d[S::sweep_pick] =
        "DELETE FROM ${table}_clients WHERE valid_until <= ${now_ms} LIMIT ?1; "
        "SELECT t.name FROM ${table} AS t WHERE t.valid_until <= ${now_ms} AND ${until:t} <= ${now_ms} "
        "AND t.waited_until <= ${now_ms} LIMIT ?1 FOR UPDATE SKIP LOCKED";
    // The DELETE's Client test is ${until} <= now spelled out for a row past its own time:
    // MariaDB has no alias in a single-table DELETE, and its multi-table DELETE turns the list
    // of 1000 names into a join, which scanned the valid_until index and waited for the rows
    // a session lock held.
    d[S::sweep_delete] =
        "DELETE FROM ${table} WHERE name IN (${names}) AND valid_until <= ${now_ms} AND waited_until <= ${now_ms} "
        "AND NOT EXISTS (SELECT 1 FROM ${table}_clients AS c WHERE c.id = ${table}.client "
        "AND c.valid_until > ${now_ms})";
    d.sweep_batch_max = 1000;
    // The held name's row and its holders and marks, in one statement (affected counts both).
    d[S::force_release] =
        "DELETE t, h FROM ${table} AS t LEFT JOIN ${table}_holders AS h ON h.name = t.name "
        "WHERE t.name = ?1 AND ${until:t} > ${now_ms}";

    // GET_LOCK is held by the connection, so it is released explicitly after migrating.
    d[S::migration_lock] = "SELECT GET_LOCK(CONCAT('dblock:migrate:', LEFT(SHA1('${table}'), 24)), 60)";
    d[S::migration_unlock] = "DO RELEASE_LOCK(CONCAT('dblock:migrate:', LEFT(SHA1('${table}'), 24)))";
    d[S::drop_schema] =
        "DROP TABLE IF EXISTS ${table}, ${table}_schema_history, ${table}_fence, ${table}_fence_cache, "
        "${table}_fence_seq, ${table}_holders, ${table}_queue, ${table}_clients; "
        "DROP PROCEDURE IF EXISTS ${table}_fence_next; DROP PROCEDURE IF EXISTS ${table}_fence_draw; "
        "DROP PROCEDURE IF EXISTS ${table}_lease_grant; "
        "DROP PROCEDURE IF EXISTS ${table}_lease_take; DROP PROCEDURE IF EXISTS ${table}_lease_release; "
        "DROP PROCEDURE IF EXISTS ${table}_handed_grant; DROP PROCEDURE IF EXISTS ${table}_handed_take; "
        "DROP PROCEDURE IF EXISTS ${table}_queue_join; DROP PROCEDURE IF EXISTS ${table}_turn_wait; "
        "DROP PROCEDURE IF EXISTS ${table}_turn_take; DROP PROCEDURE IF EXISTS ${table}_acquire_shared; "
        "DROP PROCEDURE IF EXISTS ${table}_release_shared; DROP PROCEDURE IF EXISTS ${table}_extend_shared; "
        "DROP PROCEDURE IF EXISTS ${table}_try_share; "
        "DROP PROCEDURE IF EXISTS ${table}_lock_in; DROP PROCEDURE IF EXISTS ${table}_check";
    d[S::history_create] =
        "CREATE TABLE IF NOT EXISTS ${table}_schema_history ("
        "installed_rank INT NOT NULL PRIMARY KEY, version VARCHAR(50), description VARCHAR(200) NOT NULL, "
        "type VARCHAR(20) NOT NULL, script VARCHAR(1000) NOT NULL, checksum INT, "
        "installed_by VARCHAR(100) NOT NULL, installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
        "execution_time INT NOT NULL, success TINYINT(1) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
    d[S::history_select] =
        "SELECT version, script, checksum, success, installed_rank FROM ${table}_schema_history ORDER BY installed_rank";
    d[S::history_insert] =
        "INSERT INTO ${table}_schema_history (installed_rank, version, description, type, script, checksum, "
        "installed_by, execution_time, success) VALUES (?1, ?2, ?3, 'SQL', ?4, ?5, ?6, ?7, 1)";
    d.settings = mysql_settings;
    d.check();
    return d;
  }
}

}  // namespace

const Dialect& mysql_dialect() {
  static const Dialect d = make();
  return d;
}

std::string mysql_row_wait(const std::string& call, const std::string& wait) {
  return "SET @dblock_row_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = "
         "GREATEST(1, CEIL(" + wait + " / 1000)); " + call + "; SET SESSION innodb_lock_wait_timeout = @dblock_row_wait";
}

}  // namespace dblock::detail::sqldb
