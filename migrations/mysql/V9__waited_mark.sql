-- Fair grants that read the queue only when someone waited (docs/ARCHITECTURE.md, "Fair
-- waiting"). V8's grants looked the queue up on every acquire, and the lookup cost as much as
-- the grant's own statements put together (docs/BENCHMARKS.md). Now a waiter that joins the
-- queue also marks the name's row: waited_until, the end of its ticket's life at the time. A
-- grant reads the queue only on a row so marked, and that read is a condition of the
-- upsert, which locks the row anyway. The name's row outlives its release while it is
-- marked (a release frees it rather than deleting it, and the sweeper keeps marked rows), so
-- a name is never both unmarked and waited for; a lease release is a single UPDATE again,
-- since the winner's ticket now goes with its grant.
--
-- New procedure names, so that clients of an older dblock keep calling V8's during an
-- upgrade (their waiters do not mark rows: until every client is upgraded, a new client may
-- pass an old client's waiter, as before fair waiting existed). Each procedure answers
-- exactly one result set on every path and commits its own transaction.
ALTER TABLE ${table} ADD COLUMN waited_until BIGINT NOT NULL DEFAULT 0;

DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_lease_grant//
DROP PROCEDURE IF EXISTS ${table}_lease_take//

-- The insert strategy: V8's ${table}_grant_queued in one procedure. The row is granted when
-- it is free and no live ticket of another owner is below p_ticket (looked up only on a
-- marked row; p_ticket 0: never), or when it is a live leftover of the asker's own (holds >
-- 0), which is taken over with a new fence; a missing row is created granted. An UPDATE
-- comes first, not an upsert: under READ COMMITTED an UPDATE that does not match leaves the
-- row unlocked (and does not wait for a lock on it), where an upsert locks the row even to
-- answer busy, so the busy attempt of a holder that asks again right after its release
-- would hold up the grant of the waiter that release woke. The grant marks the row's fence
-- -1 (no fence is negative); the fence is then drawn under the row lock, so fences follow
-- grant order. A rival that creates the same missing row first makes this one busy.
-- Answers (fence, ms left) when granted, (0, holder's ms left, holder) when a holder is live
-- (V6's third column: a writer busy behind readers learns it so), (0, 0, '') when the name
-- waits for a ticket ahead, and no row when a rival's new row is not committed yet.
CREATE PROCEDURE ${table}_lease_grant(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                      IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE won BIGINT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR 1062 SET won = 0;  -- the rival's row: busy
    START TRANSACTION;
    UPDATE ${table} SET owner = p_owner, fence = -1, holds = 1, acquired_at = now_ms, valid_until = now_ms + p_ttl,
        version = version + 1
    WHERE name = p_name AND ((valid_until <= now_ms AND (waited_until <= now_ms OR p_ticket = 0 OR NOT EXISTS (
            SELECT 1 FROM ${table}_queue AS q WHERE q.name = p_name AND q.ticket < p_ticket
            AND q.owner <> p_owner AND q.valid_until > now_ms)))
        OR (owner = p_owner AND holds > 0 AND valid_until > now_ms));
    SET won = ROW_COUNT();
    IF won = 0 THEN
        INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
        SELECT p_name, p_owner, -1, 1, now_ms, now_ms + p_ttl, 1 FROM DUAL
        WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE name = p_name);
        SET won = ROW_COUNT();
    END IF;
    IF won > 0 THEN
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
        UPDATE ${table} SET fence = LAST_INSERT_ID() WHERE name = p_name;
        IF p_ticket BETWEEN 1 AND 9223372036854775806 THEN
            DELETE FROM ${table}_queue WHERE name = p_name AND owner = p_owner;
        END IF;
        SELECT LAST_INSERT_ID(), p_ttl;
    ELSE
        SELECT 0, GREATEST(valid_until - now_ms, 0), IF(valid_until > now_ms, owner, '') FROM ${table}
        WHERE name = p_name;
    END IF;
    COMMIT;
END//

-- The optimistic strategy: V8's ${table}_take_queued in one procedure, under the same rule.
-- Answers (fence, ms left) when the compare-and-set won, no row when it lost or a ticket is
-- ahead.
CREATE PROCEDURE ${table}_lease_take(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                     IN p_version BIGINT, IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    START TRANSACTION;
    UPDATE ${table} SET owner = p_owner, fence = -1, holds = 1, acquired_at = now_ms, valid_until = now_ms + p_ttl,
        version = version + 1
    WHERE name = p_name AND version = p_version AND valid_until <= now_ms
        AND (waited_until <= now_ms OR p_ticket = 0 OR NOT EXISTS (
            SELECT 1 FROM ${table}_queue AS q WHERE q.name = p_name AND q.ticket < p_ticket
            AND q.owner <> p_owner AND q.valid_until > now_ms));
    IF ROW_COUNT() > 0 THEN
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
        UPDATE ${table} SET fence = LAST_INSERT_ID() WHERE name = p_name;
        IF p_ticket BETWEEN 1 AND 9223372036854775806 THEN
            DELETE FROM ${table}_queue WHERE name = p_name AND owner = p_owner;
        END IF;
        SELECT LAST_INSERT_ID(), p_ttl;
    ELSE
        SELECT 0, 0 FROM DUAL WHERE FALSE;
    END IF;
    COMMIT;
END//

DELIMITER ;
