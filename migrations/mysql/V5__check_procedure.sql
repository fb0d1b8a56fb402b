-- The fence check for the service's own transactions (README, "Protecting rows in the same
-- database"), for code in any language:
--     START TRANSACTION; CALL ${table}_check('job', 42); UPDATE ...; COMMIT;
-- succeeds only while 42 is the current, unexpired holder's lease on 'job' (insert or
-- optimistic strategy), and keeps it so until the caller's transaction ends: the row is
-- read LOCK IN SHARE MODE (a locking read sees the latest committed row whatever the
-- isolation level), so no takeover, release or sweep of it commits first; the holder's
-- renewals wait for it too, so keep such transactions short. Otherwise it raises SQLSTATE
-- DL001 naming the lock and the fence, and the caller must roll back. Outside a transaction
-- (autocommit) the share lock ends with the CALL: the check then guards nothing after it.
DELIMITER //

DROP PROCEDURE IF EXISTS ${table}_check//

CREATE PROCEDURE ${table}_check(IN p_name VARBINARY(255), IN p_fence BIGINT)
    READS SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE now_ms BIGINT DEFAULT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000;
    DECLARE held INT DEFAULT 0;
    DECLARE message VARCHAR(512);
    SELECT COUNT(*) INTO held FROM ${table}
    WHERE name = p_name AND fence = p_fence AND holds > 0 AND valid_until > now_ms
    LOCK IN SHARE MODE;
    IF held = 0 THEN
        SET message = CONCAT('dblock: lock ''', CAST(p_name AS CHAR CHARACTER SET utf8mb4), ''' is not held with fence ',
                             p_fence, ' (released, expired or taken over)');
        SIGNAL SQLSTATE 'DL001' SET MESSAGE_TEXT = message;
    END IF;
END//

DELIMITER ;
