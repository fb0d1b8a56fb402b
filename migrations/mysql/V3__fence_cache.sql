-- Fences for the session strategies (for-update, advisory) without a durable commit per
-- grant. A session lock is not a row write, so its fence draw was the only write of a grant,
-- and its commit waited for the redo log flush: on the benchmark VM 0.45-0.5 ms of a 0.6 ms
-- advisory acquire+release. PostgreSQL's sequence logs 32 values ahead and flushes once
-- per 32 draws; this is the same idea written out:
--
-- * ${table}_fence (V1) stays the durable truth: every fence ever handed out is at most its
--   value, committed (flushed) before the fence is returned.
-- * A draw reserves a block of 100 values by raising that counter in a committed
--   transaction of its own, returns the first, and leaves the rest in ${table}_fence_cache,
--   a MEMORY table (server memory: no redo log, no flush). Later draws take the next value
--   from it with one UPDATE ... LAST_INSERT_ID(expr) under the table's lock.
-- * A restart or crash empties MEMORY tables; the next draw reserves a new block above the
--   counter, so no value is handed out twice. Gaps (at most a block per restart) are fine:
--   fences need only grow.
-- * The cache is used only while it covers the counter (reserved_to >= value): a lease
--   grant (insert, optimistic) bumps the counter by one in its own transaction, and the next
--   session draw then reserves above it, so fences grow per table across all strategies,
--   and switching a name from one strategy to another never hands out a smaller fence.
-- * Blocks reserved by two draws at once are installed in counter order only (a cache never
--   goes back to a lower block); a draw whose block was not installed still returns its
--   first value, which is above everything handed out before its draw began.
-- * Where MEMORY tables cannot be made or written (MySQL InnoDB Cluster setups list MEMORY
--   in disabled_storage_engines; Group Replication rejects writes to non-InnoDB tables),
--   this migration still succeeds without the table, the cache's statements fail, the
--   handlers below swallow that, and every draw raises the counter by one in a committed
--   transaction of its own, as before V3.
--
-- Called outside a transaction only (the reservation's START TRANSACTION would commit the
-- caller's). Answers one row: the fence, or 0 when p_won is not 1 (GET_LOCK's answer in
-- the advisory texts, so that the lock and its fence stay one round trip).
DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_fence_draw//
DROP PROCEDURE IF EXISTS ${table}_fence_cache_create//

-- A procedure only so that a server refusing MEMORY tables does not fail the migration.
CREATE PROCEDURE ${table}_fence_cache_create()
BEGIN
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    CREATE TABLE ${table}_fence_cache (
        id          TINYINT NOT NULL PRIMARY KEY,
        given       BIGINT  NOT NULL,  -- the last value handed out from the block
        reserved_to BIGINT  NOT NULL   -- the block's last value: the counter when it was reserved
    ) ENGINE=MEMORY;
END//
CALL ${table}_fence_cache_create()//
DROP PROCEDURE ${table}_fence_cache_create//

CREATE PROCEDURE ${table}_fence_draw(IN p_won INT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE broken INT DEFAULT 0;  -- the cache cannot be used here
    DECLARE hit INT DEFAULT 0;
    DECLARE block_end BIGINT;
    IF p_won IS NULL OR p_won <> 1 THEN
        SELECT 0;
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

DELIMITER ;
