-- V10's release, which also deletes a ticket of the releaser's own on a row waiters marked
-- (docs/ARCHITECTURE.md, "Fair waiting"). An owner is one thread of one Client, so a ticket
-- of ours while we hold the name is a renewal that crossed the hand-over that granted it to
-- us: queue_join's guard reads the row without locking it (READ COMMITTED), so a renewal
-- whose read came before that hand-over's commit and whose INSERT came after writes the
-- ticket back. Left, it put a waiter nobody was in the line ahead of every later one (fresh
-- acquirers busy for up to its 3 s) and took the next hand-over, to an owner that no longer
-- waited. The same name and answers as V10's.
DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_lease_release//

CREATE PROCEDURE ${table}_lease_release(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_fence BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE marked BIGINT DEFAULT NULL;
    DECLARE next_owner VARBINARY(512) DEFAULT NULL;
    DECLARE next_ticket BIGINT DEFAULT 0;
    DECLARE handed INT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    START TRANSACTION;
    SELECT waited_until INTO marked FROM ${table}
    WHERE name = p_name AND owner = p_owner AND fence = p_fence FOR UPDATE;
    IF marked > now_ms THEN
        DELETE FROM ${table}_queue WHERE name = p_name AND owner = p_owner;
        SELECT owner, ticket INTO next_owner, next_ticket FROM ${table}_queue
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
        UPDATE ${table}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1;
        UPDATE ${table} SET owner = next_owner, fence = LAST_INSERT_ID(), holds = 1, acquired_at = now_ms,
            valid_until = now_ms + 3000, version = version + 1, handed_to = next_ticket
        WHERE name = p_name;
        COMMIT;
        SELECT -1;
    ELSE
        UPDATE ${table} SET owner = '', holds = 0, valid_until = now_ms, version = LAST_INSERT_ID(version + 1),
            handed_to = 0
        WHERE name = p_name;
        COMMIT;
        SELECT LAST_INSERT_ID();
    END IF;
END//

DELIMITER ;
