-- Fences that stay ahead across a promotion (docs/ARCHITECTURE.md, "PostgreSQL"). A standby
-- promoted without the last WAL of its primary (an asynchronous standby) has a sequence behind
-- the fences its primary granted: nextval would hand those out again. The server's timeline
-- ID rises at every promotion, so a fence carries it in its high bits, as ZooKeeper's zxid
-- carries the leader's epoch: every fence drawn after a promotion is above every fence drawn
-- before it, whatever the promoted server lacked.
--
-- The timeline lives in the sequence itself rather than being added at each draw: the first
-- draw on a newer timeline moves the sequence up to (timeline << 40) + its low bits, once,
-- and every draw after it is above, a plain nextval too (an older dblock during an upgrade,
-- whose fences are then ordered with ours). 40 bits leave 1.1e12 grants per timeline (3.5
-- years at 10 000 a second; past that the count carries into the timeline's bits, still
-- increasing) and fences stay below 2^53, exact as a JSON number in JavaScript, for 8 191
-- timelines. Taking locks now needs UPDATE on the sequence, not only USAGE (setval).

-- ${table}_fence_next(): the next fence. The timeline is the one WAL is written on now (a WAL
-- file's name begins with it, 8 hex digits). The move up is made under a transaction lock in
-- the two-int advisory key space (apart from the single bigint keys every strategy uses),
-- and checked again under it, so two drawers that both saw an old timeline move it once: a
-- second setval could put the sequence below a fence the first had already handed out.
CREATE FUNCTION ${table}_fence_next() RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$
DECLARE
    fence bigint := nextval('${table}_fence');
    timeline bigint := ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint;
BEGIN
    IF fence >> 40 < timeline THEN
        PERFORM pg_advisory_xact_lock(1684171883, hashtext('${table}'));  -- 'dblk'
        fence := nextval('${table}_fence');
        IF fence >> 40 < timeline THEN
            IF timeline >= 8388608 THEN
                RAISE EXCEPTION 'dblock: timeline % does not fit in a fence of ${table}', timeline;
            END IF;
            PERFORM setval('${table}_fence', (timeline << 40) + (fence & 1099511627775));
            fence := nextval('${table}_fence');
        END IF;
    END IF;
    RETURN fence;
END
$dblock$;

-- The draws in the functions of earlier migrations go through it too. Their definitions are
-- rewritten in place, the one call replaced, so this script does not repeat their bodies (a
-- migration never edits an applied one).
DO $dblock$
DECLARE
    f regprocedure;
    def text;
BEGIN
    FOREACH f IN ARRAY ARRAY['${table}_lock_in(text, bigint, bigint)'::regprocedure,
                             '${table}_acquire_shared(text, text, text, integer, bigint)'::regprocedure] LOOP
        def := pg_get_functiondef(f);
        IF position($q$nextval('${table}_fence')$q$ IN def) = 0 THEN
            RAISE EXCEPTION 'dblock: % does not draw its fence with nextval as migration V4 expects', f;
        END IF;
        EXECUTE replace(def, $q$nextval('${table}_fence')$q$, '${table}_fence_next()');
    END LOOP;
END
$dblock$;
