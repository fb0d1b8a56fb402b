-- The insert strategy's acquire as ${table}_grant: like ${table}_acquire (V2), except that a
-- live row of the caller's own owner is taken over with a new fence instead of re-entered,
-- unless it is a lease kept after its release (holds 0: LockOptions::hold_at_least), which
-- is busy like anyone else's.
-- A client counts its re-entries itself and writes the count with each renewal, so it asks
-- for a fresh grant only when it holds none: a row that still names its owner is a leftover
-- (an acquire whose answer was lost, a release that failed), and re-entering it would hand
-- out its old fence again. ${table}_acquire stays for clients of an older dblock on the same
-- table during an upgrade; the two grant the same rows and draw from the same counter.
--
-- Answers (fence, ms left) when granted, (0, holder's ms left) when busy, and commits its
-- own transaction (see V2 for the order of the assignments and the fence draw).
DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_grant//

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
    SELECT IF(owner = p_owner AND holds > 0, fence, 0), valid_until - now_ms FROM ${table} WHERE name = p_name;
    COMMIT;
END//

DELIMITER ;
