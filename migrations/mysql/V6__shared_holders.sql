-- Read/write locks and semaphores on the lease strategies (insert, optimistic): docs/
-- ARCHITECTURE.md, "Lock shapes". A name held by shared holders (a read/write lock's readers,
-- or a semaphore's holders) keeps its one row in ${table}, owned by ':readers' or ':semaphore'
-- (real owners never begin with ':'), whose valid_until is never before any live holder's,
-- with holds 0 (so ${table}_check, which wants holds > 0, never takes it for a grant).
-- Every exclusive acquire meets that row and is busy until it ends, exactly as behind an
-- exclusive holder. The holders are rows of ${table}_holders. Every procedure below locks the
-- name's row first (as the exclusive acquires do), so grants, renewals and releases of a name
-- happen one at a time, and under READ COMMITTED each later read sees all of them.
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
    IF p_mode = 's' THEN
        SELECT MIN(valid_until) INTO soonest FROM ${table}_holders
        WHERE name = p_name AND mode = 'w' AND valid_until > now_ms AND owner <> p_owner;
        IF soonest IS NOT NULL THEN  -- a writer waits: readers queue behind it
            COMMIT;
            SELECT 0, soonest - now_ms;
            LEAVE acquire;
        END IF;
    END IF;
    UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
    SET granted = LAST_INSERT_ID();
    INSERT INTO ${table}_holders (name, owner, mode, permits, fence, holds, acquired_at, valid_until)
    VALUES (p_name, p_owner, p_mode, p_permits, granted, 1, now_ms, now_ms + p_ttl) ON DUPLICATE KEY UPDATE
        mode = p_mode, permits = p_permits, fence = granted, holds = 1, acquired_at = now_ms, valid_until = now_ms + p_ttl;
    UPDATE ${table} SET
        acquired_at = IF(row_owner LIKE ':%' AND row_until > now_ms, acquired_at, now_ms),
        valid_until = GREATEST(IF(row_owner LIKE ':%', row_until, 0), now_ms + p_ttl),
        owner = summary, fence = granted, holds = 0, version = version + 1
    WHERE name = p_name;
    COMMIT;
    SELECT granted, p_ttl;
END//

-- (name, owner, fence) -> a row when it was ours: deletes the holder and brings the name's
-- row back to the latest live holder's time (0 with none left: a waiting writer gets in).
CREATE PROCEDURE ${table}_release_shared(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_fence BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE named INT DEFAULT 0;
    DECLARE gone INT DEFAULT 0;
    START TRANSACTION;
    SELECT COUNT(*) INTO named FROM ${table} WHERE name = p_name AND owner LIKE ':%' FOR UPDATE;
    DELETE FROM ${table}_holders WHERE name = p_name AND owner = p_owner AND fence = p_fence AND mode <> 'w';
    SET gone = ROW_COUNT();
    IF gone = 1 THEN
        UPDATE ${table} SET
            valid_until = COALESCE((SELECT MAX(h.valid_until) FROM ${table}_holders AS h
                                    WHERE h.name = p_name AND h.mode <> 'w' AND h.valid_until > now_ms), 0),
            version = version + 1
        WHERE name = p_name AND owner LIKE ':%';
    END IF;
    COMMIT;
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
