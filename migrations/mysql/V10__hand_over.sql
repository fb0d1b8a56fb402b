-- The release hands the row to the next waiter (docs/ARCHITECTURE.md, "Fair waiting"). The
-- release of a grant made after waiting, on a row a waiter marked, grants the row to the
-- lowest live ticket's owner in its own transaction: a new fence, a lease of a ticket's life
-- (3 s, which the new holder's watchdog renews to its TTL), the ticket deleted, and the
-- ticket's number in handed_to. The waiter's turn key wakes it as before, and its grant
-- answers the row handed to its ticket without writing anything: no commit, no redo log
-- flush between the release and the next holder's work. A release that finds no live
-- ticket frees the row as V9's release did.
--
-- A row is handed to a ticket, not just to an owner: an owner's acquire that gave up (its
-- ticket deleted by the hand-over a moment before its own leave) must not pass its grant to
-- the same owner's next acquire as if it were that one's; the leave frees a row handed to
-- its ticket instead. New procedure names, so that clients of an older dblock keep calling
-- V9's during an upgrade: handed a row, an old client's grant takes it over as a leftover of
-- its own (a new fence and its own TTL). Each procedure answers exactly one result set on
-- every path.
ALTER TABLE ${table} ADD COLUMN handed_to BIGINT NOT NULL DEFAULT 0;

DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_lease_release//
DROP PROCEDURE IF EXISTS ${table}_handed_grant//
DROP PROCEDURE IF EXISTS ${table}_handed_take//

-- Frees (p_name, p_owner, p_fence) or hands it over. The ticket is deleted before the row is
-- granted, and a ticket its waiter deleted first (it gave up) is not handed anything: the
-- DELETE's row count says which came first. Answers the row's new version when freed (the
-- optimistic strategy's hint), -1 when handed over, no row when the row was not ours.
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

-- V9's grants, answering first a row handed to p_ticket (fence, ms left) with a plain read.
CREATE PROCEDURE ${table}_handed_grant(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                       IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE handed BIGINT DEFAULT 0;
    DECLARE left_ms BIGINT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    IF p_ticket BETWEEN 1 AND 9223372036854775806 THEN
        SELECT fence, valid_until - now_ms INTO handed, left_ms FROM ${table}
        WHERE name = p_name AND owner = p_owner AND handed_to = p_ticket AND holds > 0 AND valid_until > now_ms;
    END IF;
    IF handed > 0 THEN
        SELECT handed, left_ms;
    ELSE
        CALL ${table}_lease_grant(p_name, p_owner, p_ttl, p_ticket);
    END IF;
END//

CREATE PROCEDURE ${table}_handed_take(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                      IN p_version BIGINT, IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE handed BIGINT DEFAULT 0;
    DECLARE left_ms BIGINT DEFAULT 0;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    IF p_ticket BETWEEN 1 AND 9223372036854775806 THEN
        SELECT fence, valid_until - now_ms INTO handed, left_ms FROM ${table}
        WHERE name = p_name AND owner = p_owner AND handed_to = p_ticket AND holds > 0 AND valid_until > now_ms;
    END IF;
    IF handed > 0 THEN
        SELECT handed, left_ms;
    ELSE
        CALL ${table}_lease_take(p_name, p_owner, p_ttl, p_version, p_ticket);
    END IF;
END//

DELIMITER ;
