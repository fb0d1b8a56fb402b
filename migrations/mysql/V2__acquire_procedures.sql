-- The two lease acquires as stored procedures, so that each is one short CALL instead of a
-- text of six statements that the server parses again on every acquire. On the benchmark VM
-- parsing those texts cost about 300 us per acquire (CPU alone), a fifth of an uncontended
-- acquire+release; a procedure is parsed once per connection. The logic is the one the
-- texts had (see src/backends/mysql/mysql_dialect.cpp for why it is built so).
--
-- Each procedure ends with exactly one SELECT on every path (the client reads that result
-- and then the CALL's own status), and commits its own transaction. SQL SECURITY INVOKER:
-- a CALL runs with the caller's privileges on the lock table, so a service account needs
-- EXECUTE on these two procedures besides its rights on the tables (GRANT EXECUTE ON
-- PROCEDURE db.<table>_acquire ..., or EXECUTE on the database).
DELIMITER //

-- Leftovers of a lock table dropped by hand would make CREATE fail.
DROP PROCEDURE IF EXISTS ${table}_acquire//
DROP PROCEDURE IF EXISTS ${table}_take//

-- The insert strategy: one transaction that creates the row granted to the caller, takes
-- over an expired row, counts a re-entry, or leaves a live holder's row alone (it locks the
-- name's row in every case). A fresh grant is marked fence 0 and draws its fence from the
-- counter row while holding the name's row, so fences follow grant order. MySQL applies the
-- assignments left to right, each seeing the ones before: valid_until, which the others
-- test, is set last. Answers (fence, ms left) when granted, (0, holder's ms left) when busy.
CREATE PROCEDURE ${table}_acquire(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    START TRANSACTION;
    INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version)
    VALUES (p_name, p_owner, 0, 1, now_ms, now_ms + p_ttl, 1) ON DUPLICATE KEY UPDATE
        holds = IF(valid_until <= now_ms, 1, IF(owner = p_owner, holds + 1, holds)),
        fence = IF(valid_until <= now_ms, 0, fence),
        acquired_at = IF(valid_until <= now_ms, now_ms, acquired_at),
        version = IF(valid_until <= now_ms OR owner = p_owner, version + 1, version),
        owner = IF(valid_until <= now_ms, p_owner, owner),
        valid_until = IF(valid_until <= now_ms, now_ms + p_ttl,
                         IF(owner = p_owner, GREATEST(valid_until, now_ms + p_ttl), valid_until));
    IF EXISTS (SELECT 1 FROM ${table} WHERE name = p_name AND owner = p_owner AND fence = 0) THEN
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
        UPDATE ${table} SET fence = LAST_INSERT_ID() WHERE name = p_name;
    END IF;
    SELECT IF(owner = p_owner, fence, 0), valid_until - now_ms FROM ${table} WHERE name = p_name;
    COMMIT;
END//

-- The optimistic strategy's take: compare-and-set on the version the caller read, only on
-- a row that is free, and the fence drawn under the row lock the update took. Answers
-- (fence, ms left) when the take won, no row when it lost (the version moved).
CREATE PROCEDURE ${table}_take(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                               IN p_version BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE won BIGINT DEFAULT 0;
    START TRANSACTION;
    UPDATE ${table} SET owner = p_owner, holds = 1, acquired_at = now_ms, valid_until = now_ms + p_ttl,
        version = version + 1
    WHERE name = p_name AND version = p_version AND valid_until <= now_ms;
    SET won = ROW_COUNT();
    IF won = 1 THEN
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
        UPDATE ${table} SET fence = LAST_INSERT_ID() WHERE name = p_name;
    END IF;
    SELECT fence, valid_until - now_ms FROM ${table} WHERE name = p_name AND won = 1;
    COMMIT;
END//

DELIMITER ;
