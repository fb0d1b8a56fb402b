-- dblock's schema for MySQL 8 and MariaDB 10.11 (InnoDB): the lock table and what it needs.
-- ${table} is the lock table, qualified with its database; ${table_name} the same without
-- it (index names take none). Later changes come as V2, V3, ... beside this file.
--
-- Times are milliseconds since the Unix epoch on the server's clock (UTC_TIMESTAMP: no time
-- zone or DST in play). Names and owners are VARBINARY, compared byte for byte: a utf8mb4
-- collation would fold case ('Job' = 'job') and, in MariaDB's PAD SPACE collations, ignore
-- trailing spaces ('job' = 'job '), making two names one lock.
--
-- The procedures are what dblock CALLs (src/backends/mysql/mysql_dialect.cpp): one short
-- CALL is parsed once per session, where the texts of several statements it replaces were
-- parsed on every call (about 300 us of a 1.5 ms acquire and release). Each answers exactly
-- one result set on every path (the client reads it, then the CALL's own status), and those
-- that write commit their own transaction. SQL SECURITY INVOKER: a CALL runs with the
-- caller's privileges, so an account that only locks needs SELECT, INSERT, UPDATE and
-- DELETE on the tables below and EXECUTE on the procedures.

-- One row per lock name. A row is held while valid_until is in the future, or while the
-- Client row it names is valid (${table}_clients); the sweeper deletes the others, but for
-- rows a waiter marked (waited_until). In the procedures below, ${until:ALIAS} stands for
-- until when the row ALIAS is held (the later of the two: src/sql/dialect.hpp).
CREATE TABLE ${table} (
    name         VARBINARY(255) NOT NULL,  -- the lock name (1..255 bytes of UTF-8)
    owner        VARBINARY(512) NOT NULL,  -- host:pid:instance:thread; '' when free; ':readers'
                                           -- or ':semaphore' when shared holders hold it
    fence        BIGINT NOT NULL,          -- fencing token of the current grant (-1 for a moment
                                           -- inside a grant, before its fence is drawn)
    holds        INT    NOT NULL,          -- re-entrant holds by the owner; 0 when free, when kept
                                           -- after its release (hold_at_least) or shared
    acquired_at  BIGINT NOT NULL,
    valid_until  BIGINT NOT NULL,
    version      BIGINT NOT NULL,          -- bumped by every change: the optimistic strategy's
                                           -- compare-and-set
    waited_until BIGINT NOT NULL DEFAULT 0,  -- a waiter queues for the name until then: grants
                                             -- read ${table}_queue only on a row so marked
    handed_to    BIGINT NOT NULL DEFAULT 0,  -- the ticket a release handed the row to (0: none)
    client       CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
                                             -- a renewed lease's Client row ('' for none: fixed
                                             -- width, so that naming one updates the row in place)
    PRIMARY KEY (name),
    KEY ${table_name}_valid_until (valid_until),  -- the sweeper finds expired rows without a scan
    KEY ${table_name}_client (client)  -- a Client's renewal reads back the leases its row keeps
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- One row per Client and TTL whose leases it renews: a lease row naming it is held while
-- either is valid, so one write per tick keeps all of a Client's leases of that TTL (a row
-- per lease and tick wrote that much binlog and redo log per lease). A Client row is only
-- extended while still valid: once expired, its leases may have been taken over, and it
-- stays expired (ids are never reused) until the sweeper deletes it. Every statement that
-- gives a row to another owner, frees it or keeps it after its release sets client to ''
-- (which names no Client row, as NULL would: ${until:ALIAS} finds none and takes the row's
-- own time). Not NULL: a row that grows by the id when it comes to name one was rewritten
-- whole, 1.2 KB of redo log per lease attached against 0.3 KB (MariaDB 10.11).
CREATE TABLE ${table}_clients (
    id          CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,  -- 32 hex digits
    valid_until BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Fences. On MariaDB they come from a SEQUENCE, ${table}_fence_seq (created below), drawn
-- with NEXTVAL while the grant holds the name's row: a draw takes no lock, inside any
-- transaction, so no grant waits for another's commit to draw, and lock_in draws in the
-- caller's own transaction. Its values are never handed out twice: a block of 1000 is
-- reserved by a write of the sequence's row, logged and replicated as a transaction of its
-- own and acknowledged by a semi-synchronous replica, before the first value of it is
-- returned (a restart starts above the block; gaps are fine, fences need only grow).
-- MySQL 8 has no SEQUENCE: there the fence is this one-row counter, bumped with
-- LAST_INSERT_ID(value + n), which hands the new value to this session alone, in the
-- grant's transaction. A committed InnoDB row survives release, sweep, deleted lock rows,
-- crashes and restarts; an AUTO_INCREMENT counter would not (MySQL 8 may reuse values lost
-- in a crash). The procedures choose by the server they run on (${table}_fence_next).
CREATE TABLE ${table}_fence (
    id    TINYINT NOT NULL PRIMARY KEY,
    value BIGINT  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

INSERT INTO ${table}_fence (id, value) VALUES (1, 0);

-- Shared holders of a name: a read/write lock's readers, a semaphore's holders, and the
-- marks of writers waiting behind readers. The name keeps its one row in ${table}, owned by
-- ':readers' or ':semaphore' (real owners never begin with ':') with holds 0, lasting at
-- least as long as every live holder here: an exclusive acquire meets that row and is busy
-- until it ends, as behind an exclusive holder, and ${table}_check (holds > 0) never takes
-- it for a grant.
CREATE TABLE ${table}_holders (
    name        VARBINARY(255) NOT NULL,
    owner       VARBINARY(512) NOT NULL,
    mode        CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,  -- 's' reader, 'x' semaphore
                                                                        -- holder, 'w' a waiting writer's mark
    permits     INT    NOT NULL,  -- 1 for a read/write lock, N for a semaphore (0 for a mark)
    fence       BIGINT NOT NULL,  -- from ${table}_fence, as every grant's (0 for a mark)
    holds       INT    NOT NULL,  -- re-entrant holds; 0 once released but kept (hold_at_least)
    acquired_at BIGINT NOT NULL,
    valid_until BIGINT NOT NULL,  -- a mark's: until when new readers wait behind the writer
    PRIMARY KEY (name, owner),
    KEY ${table_name}_holders_valid_until (valid_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Fair waiting on the lease strategies: a waiter that finds a name busy takes a ticket and
-- keeps it alive while it waits; a free name goes to the lowest live ticket (or, with none,
-- to anyone), and a release hands it to that ticket's owner. A ticket lives a few seconds
-- unless renewed, so a waiter that dies holds the queue up that long at most.
CREATE TABLE ${table}_queue (
    name        VARBINARY(255) NOT NULL,
    owner       VARBINARY(512) NOT NULL,
    ticket      BIGINT NOT NULL,  -- when the waiter first found the name busy (us, server clock)
    valid_until BIGINT NOT NULL,  -- renewed while the waiter waits
    lease_ms    BIGINT NOT NULL,  -- the TTL the waiter asked for: what a hand-over grants it
    PRIMARY KEY (name, owner)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

DELIMITER //

-- Leftovers of a lock table dropped by hand would make CREATE PROCEDURE fail.
DROP PROCEDURE IF EXISTS ${table}_fence_source_create//
DROP PROCEDURE IF EXISTS ${table}_fence_next//
DROP PROCEDURE IF EXISTS ${table}_fence_draw//
DROP PROCEDURE IF EXISTS ${table}_lease_grant//
DROP PROCEDURE IF EXISTS ${table}_lease_take//
DROP PROCEDURE IF EXISTS ${table}_lease_release//
DROP PROCEDURE IF EXISTS ${table}_handed_grant//
DROP PROCEDURE IF EXISTS ${table}_handed_take//
DROP PROCEDURE IF EXISTS ${table}_queue_join//
DROP PROCEDURE IF EXISTS ${table}_turn_wait//
DROP PROCEDURE IF EXISTS ${table}_turn_take//
DROP PROCEDURE IF EXISTS ${table}_acquire_shared//
DROP PROCEDURE IF EXISTS ${table}_release_shared//
DROP PROCEDURE IF EXISTS ${table}_extend_shared//
DROP PROCEDURE IF EXISTS ${table}_lock_in//
DROP PROCEDURE IF EXISTS ${table}_try_share//
DROP PROCEDURE IF EXISTS ${table}_check//

-- ${table}_fence_seq on MariaDB; on MySQL 8, ${table}_fence_cache: fences for grants that
-- write no row (the session strategies, and readers beside live readers) without a durable
-- commit each. Such a draw was a grant's only write, and its commit waited for the redo log
-- flush (0.45 of a 0.6 ms advisory acquire and release). A draw reserves a block of 100 by
-- raising ${table}_fence in a committed transaction of its own and keeps the rest here, in
-- server memory (no redo log); later draws take the next value under the table's lock. The
-- cache is used only while it covers the counter (reserved_to >= value): a lease grant bumps
-- the counter, and the next draw then reserves above it, so fences grow per table across
-- every strategy. A restart empties it and the next draw reserves above the counter, so no
-- value is handed out twice. Where MEMORY tables cannot be made or written (InnoDB Cluster
-- lists MEMORY in disabled_storage_engines; Group Replication rejects writes to non-InnoDB
-- tables) the table is not created, the draws' handlers swallow the errors, and every draw
-- bumps the counter by one, committed. Hence a procedure: so that a server refusing the
-- CREATE does not fail the migration; and the SEQUENCE is prepared text, which MySQL 8
-- could not parse.
CREATE PROCEDURE ${table}_fence_source_create()
BEGIN
    IF VERSION() LIKE '%MariaDB%' THEN
        SET @dblock_ddl = 'CREATE SEQUENCE ${table}_fence_seq CACHE 1000';
        PREPARE dblock_ddl FROM @dblock_ddl;
        EXECUTE dblock_ddl;
        DEALLOCATE PREPARE dblock_ddl;
    ELSE
        BEGIN
            DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
            CREATE TABLE ${table}_fence_cache (
                id          TINYINT NOT NULL PRIMARY KEY,
                given       BIGINT  NOT NULL,  -- the last value handed out from the block
                reserved_to BIGINT  NOT NULL   -- the block's last value: the counter when it was reserved
            ) ENGINE=MEMORY;
        END;
    END IF;
END//
CALL ${table}_fence_source_create()//
DROP PROCEDURE ${table}_fence_source_create//

-- ${table}_fence_next(): the next fence into LAST_INSERT_ID(), for a grant that holds the
-- name's row (on MySQL 8 inside its transaction: the counter's row lock, held to the commit,
-- orders the draws as the grants).
CREATE PROCEDURE ${table}_fence_next()
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    IF VERSION() LIKE '%MariaDB%' THEN
        DO LAST_INSERT_ID(NEXTVAL(${table}_fence_seq));
    ELSE
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
    END IF;
END//

-- ${table}_fence_draw(won) -> the next fence (on MySQL 8 from the cache, see above), or 0
-- when won is not 1: it follows GET_LOCK in the advisory strategy's text, so that the lock
-- and its fence are one round trip. Called by the session strategies (for-update, advisory)
-- once they hold the name, and on MySQL 8 after lock_in, outside a transaction only (the
-- reservation's START TRANSACTION would commit the caller's). Two draws reserving at once
-- install their blocks in counter order only; the one not installed still answers its
-- block's first value, above everything handed out before its draw began.
CREATE PROCEDURE ${table}_fence_draw(IN p_won INT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE broken INT DEFAULT 0;  -- the cache cannot be used here
    DECLARE hit INT DEFAULT 0;
    DECLARE block_end BIGINT;
    DECLARE drawn BIGINT;
    IF p_won IS NULL OR p_won <> 1 THEN
        SELECT 0;
    ELSEIF VERSION() LIKE '%MariaDB%' THEN
        -- A block's reservation is a write of the sequence's row that InnoDB makes durable
        -- only with the next commit's log flush (a crash test saw a session lock's fence
        -- handed out again after the restart). A lease's draw is flushed with its grant's
        -- commit; this one commits nothing, so the first draws of a block, which find the
        -- counter below them, commit the block's end there, and that commit flushes the log
        -- past the reservation. So on MariaDB the counter says how far fences are durable.
        SET drawn = NEXTVAL(${table}_fence_seq);
        IF drawn > (SELECT value FROM ${table}_fence WHERE id = 1) THEN
            START TRANSACTION;
            UPDATE ${table}_fence SET value = GREATEST(value, (SELECT next_not_cached_value - 1 FROM ${table}_fence_seq))
            WHERE id = 1;
            COMMIT;
        END IF;
        SELECT drawn;
    ELSE
        BEGIN
            DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET broken = 1;
            UPDATE ${table}_fence_cache SET given = LAST_INSERT_ID(given + 1)
            WHERE id = 1 AND given < reserved_to
              AND reserved_to >= (SELECT value FROM ${table}_fence WHERE id = 1);
            SET hit = ROW_COUNT();
        END;
        IF broken = 0 AND hit = 1 THEN
            SELECT LAST_INSERT_ID();
        ELSE
            START TRANSACTION;
            UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + IF(broken = 1, 1, 100)) WHERE id = 1;
            COMMIT;
            SET block_end = LAST_INSERT_ID();
            IF broken = 1 THEN
                SELECT block_end;
            ELSE
                BEGIN
                    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
                    INSERT INTO ${table}_fence_cache (id, given, reserved_to) VALUES (1, block_end - 99, block_end)
                    ON DUPLICATE KEY UPDATE
                        given = IF(reserved_to < VALUES(reserved_to), VALUES(given), given),
                        reserved_to = GREATEST(reserved_to, VALUES(reserved_to));
                END;
                SELECT block_end - 99;
            END IF;
        END IF;
    END IF;
END//

-- ${table}_lease_grant(name, owner, ttl_ms, ticket): the insert strategy's acquire. p_ticket
-- is the asker's ticket (0: an unfair asker, the queue is not looked at). The row is granted
-- when it is free and no live ticket of another owner is below p_ticket (looked up only on
-- a row a waiter marked), or when it is a live leftover of the asker's own (holds > 0: an
-- acquire whose answer was lost, a release that failed; the client counts its re-entries
-- itself, so it asks only when it holds none), which is taken over with a new fence; a
-- missing row is created granted. The winner's ticket goes with the grant.
-- Answers (fence, ttl_ms) when granted; (0, holder's ms left, holder) when busy (a writer
-- busy behind readers learns so and marks the name); (0, 0, '') when a ticket is ahead;
-- no row when a rival's new row is not committed yet (busy too).
-- Fences follow grant order. On MariaDB the UPDATE that takes the row draws from the
-- sequence once the row is locked (NEXTVAL in its SET, evaluated for the row it changes), so
-- a grant is one statement and waits for no other name's commit. On MySQL 8 the counter's
-- row lock, held to the commit, orders draws as the grants: a fair asker finding the row
-- free and unmarked draws the fence first and writes it in the UPDATE that grants (one
-- statement fewer, about 40 us of a cycle); a rival taking the row in between leaves that
-- fence unused and the answer busy. Every
-- other grant takes the row first, with fence -1 (no fence is negative), then draws: unfair
-- askers race for a free row all at once, and drawing first would queue them all behind
-- the winner's commit on the counter (64 racers: 52 grants/s against 351). A fair asker
-- takes a free unmarked row only counter first: with both orders open to one asker, one
-- holding the counter and waiting for the row and one the other way round would deadlock.
-- What is left (a fair and an unfair asker on one name, a row marked between a grant's two
-- reads) InnoDB resolves by rolling one back, and the client sends the CALL again.
-- UPDATE before INSERT: under READ COMMITTED an UPDATE that matches nothing leaves the row
-- unlocked, where an upsert locks it even to answer busy and would hold up the grant of the
-- waiter a release just woke.
CREATE PROCEDURE ${table}_lease_grant(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                      IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE won BIGINT DEFAULT 0;
    DECLARE drawn INT DEFAULT 0;  -- the winning statement drew the fence itself
    DECLARE row_read INT DEFAULT 0;  -- the row was read into the three below (1), or found missing (2)
    DECLARE row_owner VARBINARY(512);
    DECLARE row_until BIGINT;
    DECLARE row_client CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
    DECLARE CONTINUE HANDLER FOR 1062 SET won = 0;  -- the rival's row: busy
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET row_read = 2;
    START TRANSACTION;
    IF VERSION() LIKE '%MariaDB%' THEN
        -- MariaDB optimises each subquery of a statement at every call, evaluated or not
        -- (${until:t} holds one, the queue test another). An asker without a ticket first
        -- tries a statement without them, which grants a row that names no Client row and
        -- that nobody waits for (or our own leftover); only a row it did not take is read, to
        -- see whether the full statement could. A waiter with a ticket goes to that at once.
        IF p_ticket NOT BETWEEN 1 AND 9223372036854775806 THEN
            UPDATE ${table} AS t SET owner = p_owner, fence = LAST_INSERT_ID(NEXTVAL(${table}_fence_seq)), holds = 1,
                acquired_at = now_ms, valid_until = now_ms + p_ttl, version = t.version + 1, client = ''
            WHERE t.name = p_name AND t.client = ''
                AND ((t.valid_until <= now_ms AND (p_ticket = 0 OR t.waited_until <= now_ms))
                     OR (t.owner = p_owner AND t.holds > 0 AND t.valid_until > now_ms));
            SET won = ROW_COUNT(), drawn = won;
            IF won = 0 THEN
                SET row_read = 1;
                SELECT t.owner, t.valid_until, t.client INTO row_owner, row_until, row_client
                FROM ${table} AS t WHERE t.name = p_name;
            END IF;
        END IF;
        IF won = 0 AND (row_read = 0 OR (row_read = 1 AND (row_client <> '' OR (p_ticket <> 0 AND row_until <= now_ms)))) THEN
            UPDATE ${table} AS t SET owner = p_owner, fence = LAST_INSERT_ID(NEXTVAL(${table}_fence_seq)), holds = 1,
                acquired_at = now_ms, valid_until = now_ms + p_ttl, version = t.version + 1, client = ''
            WHERE t.name = p_name AND ((${until:t} <= now_ms AND (p_ticket = 0 OR t.waited_until <= now_ms OR NOT EXISTS (
                    SELECT 1 FROM ${table}_queue AS q WHERE q.name = p_name AND q.ticket < p_ticket
                    AND q.owner <> p_owner AND q.valid_until > now_ms)))
                OR (t.owner = p_owner AND t.holds > 0 AND ${until:t} > now_ms));
            SET won = ROW_COUNT(), drawn = won, row_read = 0;
        END IF;
    ELSE  -- MySQL 8: the counter
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1 AND p_ticket <> 0 AND EXISTS (
            SELECT 1 FROM ${table} AS t WHERE t.name = p_name AND ${until:t} <= now_ms AND t.waited_until <= now_ms);
        IF ROW_COUNT() > 0 THEN
            UPDATE ${table} AS t SET owner = p_owner, fence = LAST_INSERT_ID(), holds = 1, acquired_at = now_ms,
                valid_until = now_ms + p_ttl, version = t.version + 1, client = ''
            WHERE t.name = p_name AND ${until:t} <= now_ms AND t.waited_until <= now_ms;
            SET won = ROW_COUNT(), drawn = won;
        END IF;
        IF won = 0 THEN
            UPDATE ${table} AS t SET owner = p_owner, fence = -1, holds = 1, acquired_at = now_ms,
                valid_until = now_ms + p_ttl, version = t.version + 1, client = ''
            WHERE t.name = p_name AND ((${until:t} <= now_ms AND (p_ticket = 0 OR (t.waited_until > now_ms AND NOT EXISTS (
                    SELECT 1 FROM ${table}_queue AS q WHERE q.name = p_name AND q.ticket < p_ticket
                    AND q.owner <> p_owner AND q.valid_until > now_ms))))
                OR (t.owner = p_owner AND t.holds > 0 AND ${until:t} > now_ms));
            SET won = ROW_COUNT();
        END IF;
    END IF;
    IF won = 0 AND row_read <> 1 THEN  -- no row, or (MySQL 8, the full statement) not known
        INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
        SELECT p_name, p_owner, -1, 1, now_ms, now_ms + p_ttl, 1 FROM DUAL
        WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE name = p_name);
        SET won = ROW_COUNT(), row_read = 0;
    END IF;
    IF won > 0 AND drawn = 0 THEN  -- the row is ours (fence -1): draw now
        CALL ${table}_fence_next();
        UPDATE ${table} SET fence = LAST_INSERT_ID() WHERE name = p_name;
    END IF;
    IF won > 0 THEN
        IF p_ticket BETWEEN 1 AND 9223372036854775806 THEN
            DELETE FROM ${table}_queue WHERE name = p_name AND owner = p_owner;
        END IF;
        SELECT LAST_INSERT_ID(), p_ttl;
    ELSEIF row_read = 1 AND row_client = '' THEN  -- busy, as the row read says
        SELECT 0, GREATEST(row_until - now_ms, 0), IF(row_until > now_ms, row_owner, '');
    ELSE
        SELECT 0, GREATEST(${until:t} - now_ms, 0), IF(${until:t} > now_ms, t.owner, '') FROM ${table} AS t
        WHERE t.name = p_name;
    END IF;
    COMMIT;
END//

-- ${table}_lease_take(name, owner, ttl_ms, version, ticket): the optimistic strategy's
-- acquire, a compare-and-set on the version the caller read, on a free row only, under the
-- same queue rule and fence order as ${table}_lease_grant. Answers (fence, ttl_ms) when it
-- won, no row when it lost (the version moved) or a ticket is ahead.
CREATE PROCEDURE ${table}_lease_take(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                     IN p_version BIGINT, IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE won BIGINT DEFAULT 0;
    DECLARE row_read INT DEFAULT 0;  -- as ${table}_lease_grant's
    DECLARE row_version BIGINT;
    DECLARE row_until BIGINT;
    DECLARE row_client CHAR(32) CHARACTER SET ascii COLLATE ascii_bin;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET row_read = 2;
    START TRANSACTION;
    IF VERSION() LIKE '%MariaDB%' THEN
        -- First without subqueries, as ${table}_lease_grant.
        IF p_ticket NOT BETWEEN 1 AND 9223372036854775806 THEN
            UPDATE ${table} AS t SET owner = p_owner, fence = LAST_INSERT_ID(NEXTVAL(${table}_fence_seq)), holds = 1,
                acquired_at = now_ms, valid_until = now_ms + p_ttl, version = t.version + 1, client = ''
            WHERE t.name = p_name AND t.version = p_version AND t.client = '' AND t.valid_until <= now_ms
                AND (p_ticket = 0 OR t.waited_until <= now_ms);
            SET won = ROW_COUNT();
            IF won = 0 THEN
                SET row_read = 1;
                SELECT t.version, t.valid_until, t.client INTO row_version, row_until, row_client
                FROM ${table} AS t WHERE t.name = p_name;
            END IF;
        END IF;
        IF won = 0 AND (row_read = 0 OR (row_read = 1 AND row_version = p_version
                                         AND (row_client <> '' OR (p_ticket <> 0 AND row_until <= now_ms)))) THEN
            UPDATE ${table} AS t SET owner = p_owner, fence = LAST_INSERT_ID(NEXTVAL(${table}_fence_seq)), holds = 1,
                acquired_at = now_ms, valid_until = now_ms + p_ttl, version = t.version + 1, client = ''
            WHERE t.name = p_name AND t.version = p_version AND ${until:t} <= now_ms
                AND (p_ticket = 0 OR t.waited_until <= now_ms OR NOT EXISTS (
                    SELECT 1 FROM ${table}_queue AS q WHERE q.name = p_name AND q.ticket < p_ticket
                    AND q.owner <> p_owner AND q.valid_until > now_ms));
            SET won = ROW_COUNT();
        END IF;
    ELSE  -- MySQL 8: the counter
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1 AND p_ticket <> 0 AND EXISTS (
            SELECT 1 FROM ${table} AS t WHERE t.name = p_name AND t.version = p_version AND ${until:t} <= now_ms
            AND t.waited_until <= now_ms);
        IF ROW_COUNT() > 0 THEN
            UPDATE ${table} AS t SET owner = p_owner, fence = LAST_INSERT_ID(), holds = 1, acquired_at = now_ms,
                valid_until = now_ms + p_ttl, version = t.version + 1, client = ''
            WHERE t.name = p_name AND t.version = p_version AND ${until:t} <= now_ms AND t.waited_until <= now_ms;
            SET won = ROW_COUNT();
        END IF;
        IF won = 0 THEN
            UPDATE ${table} AS t SET owner = p_owner, fence = -1, holds = 1, acquired_at = now_ms,
                valid_until = now_ms + p_ttl, version = t.version + 1, client = ''
            WHERE t.name = p_name AND t.version = p_version AND ${until:t} <= now_ms
                AND (p_ticket = 0 OR (t.waited_until > now_ms AND NOT EXISTS (
                    SELECT 1 FROM ${table}_queue AS q WHERE q.name = p_name AND q.ticket < p_ticket
                    AND q.owner <> p_owner AND q.valid_until > now_ms)));
            SET won = ROW_COUNT();
            IF won > 0 THEN
                CALL ${table}_fence_next();
                UPDATE ${table} SET fence = LAST_INSERT_ID() WHERE name = p_name;
            END IF;
        END IF;
    END IF;
    IF won > 0 THEN
        IF p_ticket BETWEEN 1 AND 9223372036854775806 THEN
            DELETE FROM ${table}_queue WHERE name = p_name AND owner = p_owner;
        END IF;
        SELECT LAST_INSERT_ID(), p_ttl;
    ELSE
        SELECT 0, 0 FROM DUAL WHERE FALSE;
    END IF;
    COMMIT;
END//

-- ${table}_lease_release(name, owner, fence): the release of a lease granted after waiting
-- (both lease strategies). On a row a waiter marked it hands the row to the lowest live
-- ticket's owner in the same transaction: a new fence, the lease that waiter asked for (its
-- TTL: a hand-over survives a stall as well as any grant), the ticket deleted, and its number
-- in handed_to. That waiter's grant then answers the row without writing: no commit, no redo
-- log flush between the release and the next holder's work. The ticket is deleted before
-- the row is granted, and one its waiter deleted first (it gave up) is handed nothing: the
-- DELETE's row count says which came first. A ticket of the releaser's own goes too: an
-- owner is one thread of one Client, so a ticket of ours while we hold the name is a
-- renewal that crossed the hand-over that granted it to us (queue_join reads the row
-- without locking it), and left it would stand ahead of every later waiter. With no live
-- ticket the row is freed (not deleted: its mark outlives it while someone waits; a freed
-- row expires now, not at 0, which the sweeper would pick first in every batch).
-- Answers the freed row's new version (the optimistic strategy's hint for its next take),
-- -1 when handed over, no row when the row was not ours.
CREATE PROCEDURE ${table}_lease_release(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_fence BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE marked BIGINT DEFAULT NULL;
    DECLARE next_owner VARBINARY(512) DEFAULT NULL;
    DECLARE next_ticket BIGINT DEFAULT 0;
    DECLARE next_lease BIGINT DEFAULT 0;
    DECLARE handed INT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    START TRANSACTION;
    SELECT waited_until INTO marked FROM ${table}
    WHERE name = p_name AND owner = p_owner AND fence = p_fence FOR UPDATE;
    IF marked > now_ms THEN
        DELETE FROM ${table}_queue WHERE name = p_name AND owner = p_owner;
        SELECT owner, ticket, lease_ms INTO next_owner, next_ticket, next_lease FROM ${table}_queue
        WHERE name = p_name AND owner <> p_owner AND valid_until > now_ms ORDER BY ticket LIMIT 1;
        IF next_ticket > 0 THEN
            DELETE FROM ${table}_queue WHERE name = p_name AND owner = next_owner AND ticket = next_ticket;
            SET handed = ROW_COUNT();
        END IF;
    END IF;
    IF marked IS NULL THEN
        COMMIT;
        SELECT 0 FROM DUAL WHERE FALSE;
    ELSEIF handed > 0 THEN
        CALL ${table}_fence_next();
        UPDATE ${table} SET owner = next_owner, fence = LAST_INSERT_ID(), holds = 1, acquired_at = now_ms,
            valid_until = now_ms + next_lease, version = version + 1, handed_to = next_ticket, client = ''
        WHERE name = p_name;
        COMMIT;
        SELECT -1;
    ELSE
        UPDATE ${table} SET owner = '', holds = 0, valid_until = now_ms, version = LAST_INSERT_ID(version + 1),
            handed_to = 0, client = ''
        WHERE name = p_name;
        COMMIT;
        SELECT LAST_INSERT_ID();
    END IF;
END//

-- ${table}_handed_grant(name, owner, ttl_ms, ticket): a waiter's grant after its turn wait.
-- A row handed to p_ticket answers (fence, ms left) from a plain read, writing nothing;
-- otherwise ${table}_lease_grant. A row is handed to a ticket, not just to an owner: a grant
-- handed to an acquire that gave up must not pass to the same owner's next acquire (the one
-- that gave up frees it, Statement::handed_free).
CREATE PROCEDURE ${table}_handed_grant(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                       IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE handed BIGINT DEFAULT 0;
    DECLARE left_ms BIGINT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    IF p_ticket BETWEEN 1 AND 9223372036854775806 THEN
        SELECT t.fence, ${until:t} - now_ms INTO handed, left_ms FROM ${table} AS t
        WHERE t.name = p_name AND t.owner = p_owner AND t.handed_to = p_ticket AND t.holds > 0 AND ${until:t} > now_ms;
    END IF;
    IF handed > 0 THEN
        SELECT handed, left_ms;
    ELSE
        CALL ${table}_lease_grant(p_name, p_owner, p_ttl, p_ticket);
    END IF;
END//

-- ${table}_handed_take(name, owner, ttl_ms, version, ticket): the same for the optimistic
-- strategy, with ${table}_lease_take. Called by ${table}_turn_take.
CREATE PROCEDURE ${table}_handed_take(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                      IN p_version BIGINT, IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE handed BIGINT DEFAULT 0;
    DECLARE left_ms BIGINT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    IF p_ticket BETWEEN 1 AND 9223372036854775806 THEN
        SELECT t.fence, ${until:t} - now_ms INTO handed, left_ms FROM ${table} AS t
        WHERE t.name = p_name AND t.owner = p_owner AND t.handed_to = p_ticket AND t.holds > 0 AND ${until:t} > now_ms;
    END IF;
    IF handed > 0 THEN
        SELECT handed, left_ms;
    ELSE
        CALL ${table}_lease_take(p_name, p_owner, p_ttl, p_version, p_ticket);
    END IF;
END//

-- ${table}_queue_join(name, owner, ttl_ms, ticket, lease_ms): joins the queue of p_name
-- (p_ticket 0: a new ticket, the server's clock in us) or writes p_owner's ticket back for
-- p_ttl ms more, with the lease a hand-over is to grant it, and answers the ticket. The name's row is marked first, in the same transaction, so that
-- a grant which finds it unmarked finds no ticket either: for twice a ticket's life, written
-- only when less than one is left (so the join rarely holds the row locked through its
-- commit), or created free and marked. Under READ COMMITTED the UPDATE reads a row it does
-- not change without locking it. A ticket the row was just handed to is not written back:
-- no row is answered, and the waiter's next grant takes the row.
CREATE PROCEDURE ${table}_queue_join(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                     IN p_ticket BIGINT, IN p_lease_ms BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    START TRANSACTION;
    UPDATE ${table} SET waited_until = now_ms + 2 * p_ttl WHERE name = p_name AND waited_until < now_ms + p_ttl;
    INSERT IGNORE INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version, waited_until)
    SELECT p_name, '', 0, 0, now_ms, 0, 0, now_ms + 2 * p_ttl FROM DUAL
    WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE name = p_name);
    INSERT INTO ${table}_queue (name, owner, ticket, valid_until, lease_ms)
    SELECT p_name, p_owner, IF(p_ticket = 0, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)),
                               p_ticket), now_ms + p_ttl, p_lease_ms
    FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE name = p_name AND owner = p_owner
                                AND handed_to = p_ticket AND p_ticket <> 0 AND holds > 0)
    ON DUPLICATE KEY UPDATE ticket = VALUES(ticket), valid_until = VALUES(valid_until), lease_ms = VALUES(lease_ms);
    SELECT ticket FROM ${table}_queue WHERE name = p_name AND owner = p_owner;
    COMMIT;
END//

-- ${table}_turn_wait(name, owner, wait_ms): waits up to p_wait_ms for the turn key (a
-- GET_LOCK name) of the one ahead of p_owner: the owner of the live ticket just below its
-- own, or else the name's holder. A waiter that wins keeps its own key until its release,
-- which so wakes exactly the next waiter. Answers -1 when nobody holds that key (nothing to
-- wait on), 1 when it was let go (taken and given back at once), 0 when the wait ran out.
-- The key is worked out once, so that the check and the wait are on one key.
CREATE PROCEDURE ${table}_turn_wait(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_wait_ms BIGINT)
    READS SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE ahead VARBINARY(512) DEFAULT COALESCE(
        (SELECT q.owner FROM ${table}_queue AS q JOIN ${table}_queue AS m ON m.name = q.name AND m.owner = p_owner
         WHERE q.name = p_name AND q.ticket < m.ticket AND q.valid_until > now_ms ORDER BY q.ticket DESC LIMIT 1),
        (SELECT owner FROM ${table} WHERE name = p_name), '');
    DECLARE turn_key VARCHAR(64) DEFAULT CONCAT('dblock:turn:', SHA1(CONCAT('${table}', CHAR(0), p_name, CHAR(0), ahead)));
    SELECT CASE WHEN IS_USED_LOCK(turn_key) IS NULL THEN -1
                WHEN GET_LOCK(turn_key, p_wait_ms / 1000) = 1 THEN RELEASE_LOCK(turn_key) ELSE 0 END;
END//

-- ${table}_turn_take(name, owner, ttl_ms, ticket): the optimistic strategy's grant after a
-- turn wait: ${table}_handed_take, comparing on the version read just before it (a missing
-- row: -1, which no row has).
CREATE PROCEDURE ${table}_turn_take(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                    IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE seen BIGINT DEFAULT COALESCE((SELECT version FROM ${table} WHERE name = p_name), -1);
    CALL ${table}_handed_take(p_name, p_owner, p_ttl, seen, p_ticket);
END//

-- ${table}_acquire_shared(name, owner, mode, permits, ttl_ms) -> (fence, remaining): a
-- reader's (mode 's', permits 1) or a semaphore holder's (mode 'x', permits N) grant, on
-- the lease strategies. fence > 0: granted for remaining ms; 0: busy for remaining ms; the
-- asker disagrees about what the name is (a usage error, not a wait): -1, a semaphore of
-- `remaining` permits holds it; -2, readers hold it; -3, an exclusive holder (asked for a
-- semaphore: readers wait for a writer). A reader behind a writer's mark is busy before it
-- locks anything.
-- Every grant, renewal and release of a name locks the name's row first, so they happen one
-- at a time, and under READ COMMITTED each later read sees all of them; but a reader that
-- finds the row owned by ':readers' and lasting past its own lease takes it shared (LOCK IN
-- SHARE MODE), draws its fence from the sequence (MySQL 8: from ${table}_fence_cache, no lock
-- on the counter row, which every lease grant holds to its commit) and inserts its holder:
-- readers' grants commit side by side instead of one flush each. On MySQL 8 a reader that
-- finds the cache empty reserves the next block (as ${table}_fence_draw) and tries once more.
-- Anything else (a new run, a lease past the row's end, a semaphore, a MySQL 8 server without
-- MEMORY tables) locks the row
-- exclusively; a reader that extends the row adds a slack (ttl/2, at most 1 s) so that the
-- next readers find it long enough.
CREATE PROCEDURE ${table}_acquire_shared(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_mode CHAR(1),
                                         IN p_permits INT, IN p_ttl BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
acquire: BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE summary VARBINARY(16) DEFAULT IF(p_mode = 's', ':readers', ':semaphore');
    DECLARE row_owner VARBINARY(512);
    DECLARE row_until BIGINT;
    DECLARE held_mode CHAR(1);
    DECLARE held_permits INT;
    DECLARE live INT;
    DECLARE soonest BIGINT;
    DECLARE granted BIGINT;
    DECLARE slack BIGINT DEFAULT IF(p_mode = 's', LEAST(p_ttl DIV 2, 1000), 0);
    DECLARE broken INT DEFAULT 0;  -- the fence cache cannot be used here
    DECLARE hit INT DEFAULT 0;
    DECLARE reserved INT DEFAULT 0;
    DECLARE block_end BIGINT;
    IF p_mode = 's' THEN
        SELECT MIN(valid_until) INTO soonest FROM ${table}_holders
        WHERE name = p_name AND mode = 'w' AND valid_until > now_ms AND owner <> p_owner;
        IF soonest IS NOT NULL THEN  -- a writer waits: readers queue behind it
            SELECT 0, soonest - now_ms;
            LEAVE acquire;
        END IF;
        beside: LOOP
            START TRANSACTION;
            SELECT MAX(t.owner), MAX(${until:t}) INTO row_owner, row_until FROM ${table} AS t
            WHERE t.name = p_name LOCK IN SHARE MODE;
            IF row_owner IS NULL OR row_owner <> ':readers' OR row_until < now_ms + p_ttl THEN
                COMMIT;
                LEAVE beside;
            END IF;
            IF VERSION() LIKE '%MariaDB%' THEN
                SET hit = 1, granted = NEXTVAL(${table}_fence_seq);
            ELSE
                BEGIN
                    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET broken = 1;
                    UPDATE ${table}_fence_cache SET given = LAST_INSERT_ID(given + 1)
                    WHERE id = 1 AND given < reserved_to AND reserved_to >= (SELECT value FROM ${table}_fence WHERE id = 1);
                    SET hit = ROW_COUNT(), granted = LAST_INSERT_ID();
                END;
            END IF;
            IF broken = 0 AND hit = 1 THEN
                INSERT INTO ${table}_holders (name, owner, mode, permits, fence, holds, acquired_at, valid_until)
                VALUES (p_name, p_owner, 's', 1, granted, 1, now_ms, now_ms + p_ttl) ON DUPLICATE KEY UPDATE
                    mode = 's', permits = 1, fence = granted, holds = 1, acquired_at = now_ms, valid_until = now_ms + p_ttl;
                COMMIT;
                SELECT granted, p_ttl;
                LEAVE acquire;
            END IF;
            COMMIT;
            IF broken = 1 OR reserved = 1 THEN
                LEAVE beside;
            END IF;
            SET reserved = 1;
            START TRANSACTION;
            UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 100) WHERE id = 1;
            COMMIT;
            SET block_end = LAST_INSERT_ID();
            BEGIN
                DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET broken = 1;
                INSERT INTO ${table}_fence_cache (id, given, reserved_to) VALUES (1, block_end - 100, block_end)
                ON DUPLICATE KEY UPDATE
                    given = IF(reserved_to < VALUES(reserved_to), VALUES(given), given),
                    reserved_to = GREATEST(reserved_to, VALUES(reserved_to));
            END;
        END LOOP;
    END IF;
    START TRANSACTION;
    INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
    VALUES (p_name, summary, 0, 0, now_ms, 0, 1) ON DUPLICATE KEY UPDATE version = version;
    SELECT t.owner, ${until:t} INTO row_owner, row_until FROM ${table} AS t WHERE t.name = p_name FOR UPDATE;
    IF row_until > now_ms AND row_owner NOT LIKE ':%' THEN  -- an exclusive holder
        COMMIT;
        SELECT IF(p_mode = 'x', -3, 0), row_until - now_ms;
        LEAVE acquire;
    END IF;
    IF row_owner NOT LIKE ':%' OR row_until <= now_ms THEN
        -- A new run of shared holders: rows an earlier one left are dead, all but the marks.
        DELETE FROM ${table}_holders WHERE name = p_name AND mode <> 'w';
    END IF;
    SELECT MIN(mode), MIN(permits), COUNT(*), MIN(valid_until) INTO held_mode, held_permits, live, soonest
    FROM ${table}_holders WHERE name = p_name AND mode <> 'w' AND valid_until > now_ms AND owner <> p_owner;
    IF live > 0 AND (held_mode <> p_mode OR held_permits <> p_permits) THEN
        COMMIT;
        SELECT IF(held_mode = 'x', -1, -2), held_permits;
        LEAVE acquire;
    END IF;
    IF p_mode = 'x' AND live >= p_permits THEN
        COMMIT;
        SELECT 0, soonest - now_ms;
        LEAVE acquire;
    END IF;
    CALL ${table}_fence_next();
    SET granted = LAST_INSERT_ID();
    INSERT INTO ${table}_holders (name, owner, mode, permits, fence, holds, acquired_at, valid_until)
    VALUES (p_name, p_owner, p_mode, p_permits, granted, 1, now_ms, now_ms + p_ttl) ON DUPLICATE KEY UPDATE
        mode = p_mode, permits = p_permits, fence = granted, holds = 1, acquired_at = now_ms, valid_until = now_ms + p_ttl;
    UPDATE ${table} SET
        acquired_at = IF(row_owner LIKE ':%' AND row_until > now_ms, acquired_at, now_ms),
        valid_until = GREATEST(IF(row_owner LIKE ':%', row_until, 0), now_ms + p_ttl + slack),
        owner = summary, fence = granted, holds = 0, version = version + 1, client = ''
    WHERE name = p_name;
    COMMIT;
    SELECT granted, p_ttl;
END//

-- ${table}_release_shared(name, owner, fence) -> a row when it was ours: deletes the holder
-- (a commit of its own, with no lock on the name's row, so releases overlap), then, if the
-- row now lasts longer than the latest live holder needs (readers keep the slack), locks the
-- row and brings it back to that (0 with none left: a waiting writer gets in). That lock
-- waits for every reader's grant under way, and the reads after it see them. Of two last
-- holders releasing at once, the one whose delete commits last sees no holder left.
CREATE PROCEDURE ${table}_release_shared(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_fence BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE gone INT DEFAULT 0;
    DECLARE row_owner VARBINARY(512);
    DECLARE row_until BIGINT;
    DECLARE latest BIGINT;
    START TRANSACTION;
    DELETE FROM ${table}_holders WHERE name = p_name AND owner = p_owner AND fence = p_fence AND mode <> 'w';
    SET gone = ROW_COUNT();
    COMMIT;
    IF gone = 1 THEN
        SELECT MAX(owner), MAX(valid_until) INTO row_owner, row_until FROM ${table} WHERE name = p_name;
        SELECT MAX(valid_until) INTO latest FROM ${table}_holders
        WHERE name = p_name AND mode <> 'w' AND valid_until > now_ms;
        IF row_owner LIKE ':%' AND (latest IS NULL OR row_until > latest + IF(row_owner = ':readers', 1000, 0)) THEN
            START TRANSACTION;
            SELECT MAX(owner), MAX(valid_until) INTO row_owner, row_until FROM ${table} WHERE name = p_name FOR UPDATE;
            SELECT MAX(valid_until) INTO latest FROM ${table}_holders
            WHERE name = p_name AND mode <> 'w' AND valid_until > now_ms;
            UPDATE ${table} SET
                valid_until = IF(latest IS NULL, 0, LEAST(valid_until, latest + IF(owner = ':readers', 1000, 0))),
                version = version + 1
            WHERE name = p_name AND owner LIKE ':%';
            COMMIT;
        END IF;
    END IF;
    SELECT 1 FROM DUAL WHERE gone = 1;
END//

-- ${table}_extend_shared(name, owner, fence, ms, holds, keep) -> ms left, when the holder is
-- still ours and live. A renewal (keep 0) extends it to at least ms from now and writes its
-- hold count; a keep (keep 1: released, LockOptions::hold_at_least) has it end ms from now,
-- with the holds given (0). The name's row lasts at least as long.
CREATE PROCEDURE ${table}_extend_shared(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_fence BIGINT,
                                        IN p_ms BIGINT, IN p_holds INT, IN p_keep INT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE named INT DEFAULT 0;
    DECLARE mine INT DEFAULT 0;
    START TRANSACTION;
    SELECT COUNT(*) INTO named FROM ${table}
    WHERE name = p_name AND owner LIKE ':%' AND valid_until > now_ms FOR UPDATE;
    SELECT COUNT(*) INTO mine FROM ${table}_holders
    WHERE name = p_name AND owner = p_owner AND fence = p_fence AND mode <> 'w' AND valid_until > now_ms;
    IF named = 1 AND mine = 1 THEN
        UPDATE ${table}_holders
        SET valid_until = IF(p_keep = 1, now_ms + p_ms, GREATEST(valid_until, now_ms + p_ms)), holds = p_holds
        WHERE name = p_name AND owner = p_owner;
        UPDATE ${table} SET valid_until = GREATEST(valid_until, now_ms + p_ms), version = version + 1
        WHERE name = p_name;
    END IF;
    COMMIT;
    SELECT valid_until - now_ms FROM ${table}_holders
    WHERE name = p_name AND owner = p_owner AND fence = p_fence AND named = 1 AND mine = 1;
END//

-- ${table}_lock_in(name, key, wait_ms): the lock `name` for the rest of the calling
-- transaction (LockTable::lock_in, dblock/mysql.hpp). It holds the name's row FOR UPDATE, as
-- the for-update strategy and a lease's takeover need it, so the commit, the rollback or the
-- connection's end frees it. Answers one row (answer, fence): (1, fence) when locked, 0 when
-- another transaction or a session lock kept the row past wait_ms (or an advisory lock holds
-- the name: p_key is the advisory strategy's key), -ms when a lease holds it for ms more.
-- On MariaDB the fence is drawn here, from the sequence, once the row is locked: a draw
-- holds nothing until the caller's commit. On MySQL 8 it is not (fence 0): raising
-- ${table}_fence in the caller's transaction would keep the counter row locked until that
-- transaction ends, and every grant on the table would wait for it; the client draws it on
-- a connection of its own with ${table}_fence_draw.
-- InnoDB keeps a row lock until the transaction ends, even when the row did not match: a
-- busy answer must leave nothing locked, or a lease holder's renewals would wait behind the
-- caller's transaction. So a lease is looked for first with a plain read, which locks
-- nothing, and the row is locked only when that read shows it free. (Under REPEATABLE READ
-- that read is the transaction's snapshot, which would not see the lease go: the client
-- does not wait for it.) Should the locked read show a live lease after all (granted since
-- the snapshot), the row cannot be let go: DL003, the caller must roll back. A try (a wait
-- under a second: every first attempt) on a row seen free is a locking read with SKIP
-- LOCKED, no row meaning another transaction holds it. A wait is the server's own, in whole
-- seconds (innodb_lock_wait_timeout, set for the call and put back), as is a try on a name
-- with no row yet (its INSERT cannot skip); the client repeats a shorter one as tries. With
-- innodb_rollback_on_timeout on, a lock wait timeout would roll back the caller's whole
-- transaction: DL004, refused when the call would wait.
-- GET_LOCK is not transactional: an advisory holder of the name is seen (IS_USED_LOCK), but
-- an advisory acquire does not see this lock. Do not mix the two on a name.
CREATE PROCEDURE ${table}_lock_in(IN p_name VARBINARY(255), IN p_key BIGINT, IN p_wait_ms BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
body: BEGIN
    DECLARE now_ms BIGINT;
    DECLARE saved_wait BIGINT;
    DECLARE row_until BIGINT DEFAULT NULL;
    DECLARE row_client CHAR(32) CHARACTER SET ascii DEFAULT '';
    DECLARE busy INT DEFAULT 0;
    IF IS_USED_LOCK(CONCAT('dblock:', LPAD(HEX(p_key), 16, '0'))) IS NOT NULL THEN
        SELECT 0, 0;
        LEAVE body;
    END IF;
    SET now_ms = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    -- The row's own time, and its Client row's only when it names one (${until:t} as one
    -- expression cost a tenth of the call even where it reads no Client row).
    SELECT t.valid_until, t.client INTO row_until, row_client FROM ${table} AS t WHERE t.name = p_name;
    IF row_client <> '' THEN
        SELECT ${until:t} INTO row_until FROM ${table} AS t WHERE t.name = p_name;
    END IF;
    IF row_until > now_ms THEN
        SELECT now_ms - row_until, 0;
        LEAVE body;
    END IF;
    IF row_until IS NOT NULL AND p_wait_ms < 1000 THEN
        -- A try on a row seen free: SKIP LOCKED answers no row at once when another
        -- transaction holds it, with no setting to change and put back (procedures may not
        -- use NOWAIT).
        SET row_until = NULL;
        SELECT t.valid_until, t.client INTO row_until, row_client FROM ${table} AS t
        WHERE t.name = p_name FOR UPDATE SKIP LOCKED;
        SET busy = row_until IS NULL;
    ELSE
        IF @@GLOBAL.innodb_rollback_on_timeout THEN
            SIGNAL SQLSTATE 'DL004' SET MESSAGE_TEXT =
                'dblock: lock_in needs innodb_rollback_on_timeout = OFF (a busy try would roll back the whole transaction)';
        END IF;
        SET saved_wait = @@SESSION.innodb_lock_wait_timeout;
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1205 SET busy = 1;  -- lock wait timeout
            DECLARE EXIT HANDLER FOR SQLEXCEPTION
            BEGIN
                SET SESSION innodb_lock_wait_timeout = saved_wait;
                RESIGNAL;
            END;
            -- 0 is a try on MariaDB; MySQL 8 raises it to its minimum, 1 s.
            SET SESSION innodb_lock_wait_timeout = p_wait_ms DIV 1000;
            IF row_until IS NULL THEN
                -- No row seen: make it (an insert takes no gap lock another first lock_in could
                -- deadlock on). One made meanwhile by another is locked instead, waiting for it.
                INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
                VALUES (p_name, '', 0, 0, now_ms, 0, 0) ON DUPLICATE KEY UPDATE name = name;
            END IF;
            IF busy = 0 THEN
                SELECT t.valid_until, t.client INTO row_until, row_client FROM ${table} AS t
                WHERE t.name = p_name FOR UPDATE;
            END IF;
            SET SESSION innodb_lock_wait_timeout = saved_wait;
        END;
    END IF;
    IF busy = 1 THEN
        SELECT 0, 0;
        LEAVE body;
    END IF;
    IF row_client <> '' THEN  -- the row is ours now: the latest Client row decides
        SELECT ${until:t} INTO row_until FROM ${table} AS t WHERE t.name = p_name FOR UPDATE;
    END IF;
    IF row_until > now_ms THEN
        SIGNAL SQLSTATE 'DL003' SET MESSAGE_TEXT =
            'dblock: the lock was leased after this transaction took its snapshot, and its row lock cannot be given back: roll back and try again';
    ELSEIF VERSION() LIKE '%MariaDB%' THEN
        SELECT 1, NEXTVAL(${table}_fence_seq);
    ELSE
        SELECT 1, 0;
    END IF;
END//

-- ${table}_try_share(name): the for-update strategy's reader tries the name's row with a share
-- lock, in the caller's transaction: one row, or an error at once when a writer holds it or
-- waits for it (InnoDB queues a share lock behind a waiting exclusive one). The two servers
-- spell NOWAIT differently (MySQL 8 after FOR SHARE only; MariaDB, which has no FOR SHARE,
-- after LOCK IN SHARE MODE), and a procedure's body must parse on the server that creates it:
-- the statement is prepared at the call, for the server it runs on. So the library needs no
-- connection to know its server before it opens (a full server does not fail Client::open).
CREATE PROCEDURE ${table}_try_share(IN p_name VARBINARY(255))
    READS SQL DATA SQL SECURITY INVOKER
BEGIN
    SET @dblock_share = IF(VERSION() LIKE '%MariaDB%',
                           'SELECT 1 FROM ${table} WHERE name = ? LOCK IN SHARE MODE NOWAIT',
                           'SELECT 1 FROM ${table} WHERE name = ? FOR SHARE NOWAIT'),
        @dblock_share_name = p_name;
    PREPARE dblock_share FROM @dblock_share;
    EXECUTE dblock_share USING @dblock_share_name;
    DEALLOCATE PREPARE dblock_share;
END//

-- ${table}_check(name, fence): the fence check for the service's own transactions, for code
-- in any language (dblock's own check_in sends the same SELECT without the CALL):
--     START TRANSACTION; CALL ${table}_check('job', 42); UPDATE ...; COMMIT;
-- succeeds only while 42 is the current, unexpired holder's lease on 'job' (insert or
-- optimistic strategy), and keeps it so until the caller's transaction ends: the row is read
-- LOCK IN SHARE MODE (a locking read sees the latest committed row whatever the isolation
-- level), so no takeover, release or sweep of it commits first; the holder's renewals wait
-- for it too, so keep such transactions short. Otherwise it raises SQLSTATE DL001 naming
-- the lock and the fence, and the caller must roll back. Outside a transaction (autocommit)
-- the share lock ends with the CALL: the check then guards nothing after it.
CREATE PROCEDURE ${table}_check(IN p_name VARBINARY(255), IN p_fence BIGINT)
    READS SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE held INT DEFAULT 0;
    DECLARE message VARCHAR(512);
    SELECT COUNT(*) INTO held FROM ${table} AS t
    WHERE t.name = p_name AND t.fence = p_fence AND t.holds > 0 AND ${until:t} > now_ms
    LOCK IN SHARE MODE;
    IF held = 0 THEN
        SET message = CONCAT('dblock: lock ''', CAST(p_name AS CHAR CHARACTER SET utf8mb4), ''' is not held with fence ',
                             p_fence, ' (released, expired or taken over)');
        SIGNAL SQLSTATE 'DL001' SET MESSAGE_TEXT = message;
    END IF;
END//

DELIMITER ;
