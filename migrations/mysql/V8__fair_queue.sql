-- Fair waiting on the lease strategies (docs/ARCHITECTURE.md, "Fair waiting"). A waiter that
-- finds a name busy takes a ticket here and keeps it alive while it waits; a name is granted
-- only to the asker whose ticket is the lowest live one (or, when no ticket lives, to anyone).
-- A ticket lives keep_ms (a few seconds) unless its waiter renews it, so a waiter that dies
-- holds the queue up that long at most. The winner's ticket goes with its release (the same
-- statement, so no flush of its own); until then it is behind the winner's own lease anyway.
-- The grants that read the queue are procedures of new names (${table}_grant_queued and
-- ${table}_take_queued, one argument more), so that clients of an older dblock keep calling
-- V6's and V2's during an upgrade. Held locks are untouched. Each procedure ends with exactly
-- one SELECT on every path.
CREATE TABLE ${table}_queue (
    name        VARBINARY(255) NOT NULL,
    owner       VARBINARY(512) NOT NULL,
    ticket      BIGINT NOT NULL,  -- when the waiter first found the name busy (us on the server's clock)
    valid_until BIGINT NOT NULL,  -- ms on the server's clock; renewed while the waiter waits
    PRIMARY KEY (name, owner)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_grant_queued//
DROP PROCEDURE IF EXISTS ${table}_take_queued//

-- V6's grant, unless a live ticket of another owner is below p_ticket (0: the queue is not
-- looked at; the holder's own ticket, which goes with its release, does not count) and the
-- name is not a leftover of the asker's own: then busy for a time not
-- known (0), which tells a polling waiter that it is not next (the next one polls faster).
CREATE PROCEDURE ${table}_grant_queued(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                       IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    IF p_ticket <> 0 AND EXISTS (SELECT 1 FROM ${table}_queue WHERE name = p_name AND ticket < p_ticket
                                 AND owner <> p_owner AND valid_until > now_ms
                                 AND owner <> COALESCE((SELECT t.owner FROM ${table} AS t
                                                        WHERE t.name = p_name AND t.valid_until > now_ms), ''))
       AND NOT EXISTS (SELECT 1 FROM ${table} WHERE name = p_name AND owner = p_owner AND valid_until > now_ms) THEN
        SELECT 0, 0, '';
    ELSE
        CALL ${table}_grant(p_name, p_owner, p_ttl);
    END IF;
END//

-- V2's take, under the same rule: no row when a ticket is ahead (as when the take lost).
CREATE PROCEDURE ${table}_take_queued(IN p_name VARBINARY(255), IN p_owner VARBINARY(512), IN p_ttl BIGINT,
                                      IN p_version BIGINT, IN p_ticket BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    IF p_ticket <> 0 AND EXISTS (SELECT 1 FROM ${table}_queue WHERE name = p_name AND ticket < p_ticket
                                 AND owner <> p_owner AND valid_until > now_ms
                                 AND owner <> COALESCE((SELECT t.owner FROM ${table} AS t
                                                        WHERE t.name = p_name AND t.valid_until > now_ms), '')) THEN
        SELECT 0, 0 FROM DUAL WHERE FALSE;
    ELSE
        CALL ${table}_take(p_name, p_owner, p_ttl, p_version);
    END IF;
END//

DELIMITER ;
