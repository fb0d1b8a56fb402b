-- Fair waiting on the lease strategies (docs/ARCHITECTURE.md, "Fair waiting"). A waiter that
-- finds a name busy takes a ticket here and keeps it alive while it waits; a name is granted
-- only to the asker whose ticket is the lowest live one (or, when no ticket lives, to anyone),
-- and the grant deletes the winner's ticket in the same statement. So a holder that asks
-- again at once after its release queues behind the waiters instead of winning the race.
-- A ticket lives keep_ms (a few seconds) unless its waiter renews it, so a waiter that dies
-- holds the queue up that long at most, and a lost ticket only costs its place: the table is
-- UNLOGGED (no WAL: joining the queue costs no flush; after a crash or on a promoted standby
-- it starts empty). Held locks are untouched by this migration.
CREATE UNLOGGED TABLE ${table}_queue (
    name        text COLLATE "C" NOT NULL,
    owner       text   NOT NULL,
    ticket      bigint NOT NULL,  -- when the waiter first found the name busy (us on the server's clock)
    valid_until bigint NOT NULL,  -- ms on the server's clock; renewed while the waiter waits
    PRIMARY KEY (name, owner)
);
