-- Read/write locks and semaphores on the lease strategies (insert, optimistic): docs/
-- ARCHITECTURE.md, "Lock shapes". A name held by shared holders (a read/write lock's readers,
-- or a semaphore's holders) keeps its one row in ${table}, owned by ':readers' or ':semaphore'
-- (real owners never begin with ':'), whose valid_until is never before any live holder's,
-- with holds 0 (so ${table}_check, which wants holds > 0, never takes it for a grant).
-- Every exclusive acquire meets that row and is busy until it ends, exactly as behind an
-- exclusive holder. The holders are rows of ${table}_holders. Every procedure below locks the
-- name's row first (as the exclusive acquires do), so grants, renewals and releases of a name
-- happen one at a time, and under READ COMMITTED each later read sees all of them; but a
-- reader beside live readers locks it shared and writes nothing of it, and a release that
-- leaves the row as it is does not lock it (see each procedure: readers' commits overlap).
-- Held locks are untouched by this migration. Each procedure ends with exactly one SELECT on
-- every path and commits its own transaction (as V2).
CREATE TABLE ${table}_holders (
    name        VARBINARY(255) NOT NULL,
    owner       VARBINARY(512) NOT NULL,
    mode        CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,  -- 's' reader, 'x' semaphore holder, 'w' a waiting writer's mark
    permits     INT    NOT NULL,  -- 1 for a read/write lock, N for a semaphore (0 for a mark)
    fence       BIGINT NOT NULL,  -- from ${table}_fence, as every grant's (0 for a mark)
    holds       INT    NOT NULL,  -- re-entrant holds; 0 once released but kept (hold_at_least)
    acquired_at BIGINT NOT NULL,
    valid_until BIGINT NOT NULL,  -- a mark's: until when new readers wait behind the writer
    PRIMARY KEY (name, owner),
    KEY ${table_name}_holders_valid_until (valid_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_acquire_shared//
DROP PROCEDURE IF EXISTS ${table}_release_shared//
DROP PROCEDURE IF EXISTS ${table}_extend_shared//
DROP PROCEDURE IF EXISTS ${table}_grant//

-- (name, owner, mode, permits, ttl_ms) -> (fence, remaining): fence > 0, granted for remaining
-- ms; 0, busy for remaining ms; the asker disagrees about what the name is (a usage error,
-- not a wait): -1, a semaphore of `remaining` permits holds it; -2, readers hold it; -3, an
-- exclusive holder (asked for a semaphore: readers wait for a writer).
-- A reader that finds the row owned by ':readers' and lasting past its own lease takes it
-- shared (LOCK IN SHARE MODE), draws its fence from V3's fence cache (a MEMORY table, no
-- row lock on the counter: the global counter row, locked through every grant's commit,
-- would queue every grant of the table behind one flush each), and inserts its holder; so
-- readers' grants commit side by side. The cache covers only while no grant bumped the
-- counter since its block was reserved, so its fence is above every earlier grant's; a
-- reader that finds it empty reserves the next block of 100 (one committed bump, as a
-- session draw does) and tries once more. Anything else (a new run, a lease past the row's
-- end, a semaphore, a server without MEMORY tables) gives the shared lock back (COMMIT:
-- nothing was written) and locks the row exclusively, as before; a reader that extends the
-- row adds a slack (ttl/2, at most 1 s) so that the next readers find it long enough. A
-- reader that would only be busy behind a writer's mark answers so before locking anything.
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
            SELECT MAX(owner), MAX(valid_until) INTO row_owner, row_until FROM ${table}
            WHERE name = p_name LOCK IN SHARE MODE;
            IF row_owner IS NULL OR row_owner <> ':readers' OR row_until < now_ms + p_ttl THEN
                COMMIT;
                LEAVE beside;
            END IF;
            BEGIN
                DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET broken = 1;
                UPDATE ${table}_fence_cache SET given = LAST_INSERT_ID(given + 1)
                WHERE id = 1 AND given < reserved_to AND reserved_to >= (SELECT value FROM ${table}_fence WHERE id = 1);
                SET hit = ROW_COUNT();
            END;
            IF broken = 0 AND hit = 1 THEN
                SET granted = LAST_INSERT_ID();
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
    SELECT owner, valid_until INTO row_owner, row_until FROM ${table} WHERE name = p_name FOR UPDATE;
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
    UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
    SET granted = LAST_INSERT_ID();
    INSERT INTO ${table}_holders (name, owner, mode, permits, fence, holds, acquired_at, valid_until)
    VALUES (p_name, p_owner, p_mode, p_permits, granted, 1, now_ms, now_ms + p_ttl) ON DUPLICATE KEY UPDATE
        mode = p_mode, permits = p_permits, fence = granted, holds = 1, acquired_at = now_ms, valid_until = now_ms + p_ttl;
    UPDATE ${table} SET
        acquired_at = IF(row_owner LIKE ':%' AND row_until > now_ms, acquired_at, now_ms),
        valid_until = GREATEST(IF(row_owner LIKE ':%', row_until, 0), now_ms + p_ttl + slack),
        owner = summary, fence = granted, holds = 0, version = version + 1
    WHERE name = p_name;
    COMMIT;
    SELECT granted, p_ttl;
END//

-- (name, owner, fence) -> a row when it was ours: deletes the holder (a commit of its own,
-- with no lock on the name's row, so releases overlap), then, if the row now lasts longer
-- than the latest live holder needs (readers keep the slack above it, see acquire), locks
-- the row and brings it back to that (0 with none left: a waiting writer gets in). The lock
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

-- (name, owner, fence, ms, holds, keep) -> ms left, when the holder is still ours and live. A
-- renewal (keep 0) extends it to at least ms from now and writes its hold count; a keep (keep 1:
-- released, LockOptions::hold_at_least) has it end ms from now, with the holds given (0). The
-- name's row lasts at least as long.
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

-- V4's grant, whose busy answer now also names the holder (a third column), so that a writer
-- busy behind readers learns it in the same round trip and marks the name.
CREATE PROCEDURE ${table}_grant(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    START TRANSACTION;
    INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
    VALUES (p_name, p_owner, 0, 1, now_ms, now_ms + p_ttl, 1) ON DUPLICATE KEY UPDATE
        holds = IF(valid_until <= now_ms OR (owner = p_owner AND holds > 0), 1, holds),
        fence = IF(valid_until <= now_ms OR (owner = p_owner AND holds > 0), 0, fence),
        acquired_at = IF(valid_until <= now_ms OR (owner = p_owner AND holds > 0), now_ms, acquired_at),
        version = IF(valid_until <= now_ms OR (owner = p_owner AND holds > 0), version + 1, version),
        owner = IF(valid_until <= now_ms, p_owner, owner),
        valid_until = IF(valid_until <= now_ms OR (owner = p_owner AND holds > 0), now_ms + p_ttl, valid_until);
    IF EXISTS (SELECT 1 FROM ${table} WHERE name = p_name AND owner = p_owner AND fence = 0) THEN
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
        UPDATE ${table} SET fence = LAST_INSERT_ID() WHERE name = p_name;
    END IF;
    SELECT IF(owner = p_owner AND holds > 0, fence, 0), valid_until - now_ms, owner FROM ${table} WHERE name = p_name;
    COMMIT;
END//

DELIMITER ;
