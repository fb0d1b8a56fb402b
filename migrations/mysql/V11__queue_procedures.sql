-- A waiter's join and its turn wait as procedures (docs/ARCHITECTURE.md, "Fair waiting"). Sent
-- as texts of several statements, the server parsed them on every call: the join alone took
-- about 390 us of a client's round trip with the flush off, 245 as a procedure, whose
-- statements a session parses once. Every waiter sends both on every turn, and the releaser
-- that re-enters sends them beside the hand-off it just made, on the same server. Same
-- statements as the texts they replace; each answers exactly one result set on every path.
DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_queue_join//
DROP PROCEDURE IF EXISTS ${table}_turn_wait//
DROP PROCEDURE IF EXISTS ${table}_turn_take//

-- Joins the queue of p_name, or writes p_owner's ticket p_ticket back for p_ttl ms more,
-- and answers the ticket. The name's row is marked first (twice a ticket's life, written
-- only when less than one is left, so that the join rarely holds the row locked through
-- its commit), or created free and marked. A ticket the row was handed to (V10) is not
-- written back: no row is answered, and the waiter's next grant takes the row.
CREATE PROCEDURE ${table}_queue_join(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                     IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    START TRANSACTION;
    UPDATE ${table} SET waited_until = now_ms + 2 * p_ttl WHERE name = p_name AND waited_until < now_ms + p_ttl;
    INSERT IGNORE INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version, waited_until)
    SELECT p_name, '', 0, 0, now_ms, 0, 0, now_ms + 2 * p_ttl FROM DUAL
    WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE name = p_name);
    INSERT INTO ${table}_queue (name, owner, ticket, valid_until)
    SELECT p_name, p_owner, IF(p_ticket = 0, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)),
                               p_ticket), now_ms + p_ttl
    FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE name = p_name AND owner = p_owner
                                AND handed_to = p_ticket AND p_ticket <> 0 AND holds > 0)
    ON DUPLICATE KEY UPDATE ticket = VALUES(ticket), valid_until = VALUES(valid_until);
    SELECT ticket FROM ${table}_queue WHERE name = p_name AND owner = p_owner;
    COMMIT;
END//

-- Waits up to p_wait_ms for the turn key of the one ahead of p_owner: the live ticket just
-- below its own, or else the name's holder. Answers -1 when nobody holds that key (nothing
-- to wait on), 1 when it was let go (taken and given back at once), 0 when the wait ran out.
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

-- The optimistic strategy's grant after a turn wait: V10's take, comparing on the version read
-- just before it (a missing row: -1, which no row has).
CREATE PROCEDURE ${table}_turn_take(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                    IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE seen BIGINT DEFAULT COALESCE((SELECT version FROM ${table} WHERE name = p_name), -1);
    CALL ${table}_handed_take(p_name, p_owner, p_ttl, seen, p_ticket);
END//

DELIMITER ;
