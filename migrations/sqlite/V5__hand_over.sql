-- The release hands the row to the next waiter (docs/ARCHITECTURE.md, "Fair waiting"). The
-- release of a grant made after waiting names the lowest live ticket's owner as the row's
-- owner, with the next fence and a lease of a ticket's life (3 s, which the new holder's
-- watchdog renews to its TTL), and that ticket's number here; V4's trigger on a new fence
-- deletes the ticket. The waiter, woken through its own wake file, reads the row handed to
-- its ticket instead of writing a grant of its own: one write transaction and its sync less
-- per hand-off. A row is handed to a ticket, not just to an owner, so that a grant handed to
-- an acquire that gave up is never taken for the same owner's next acquire; the waiter that
-- gives up frees it. Held locks are untouched.
ALTER TABLE ${table} ADD COLUMN handed_to INTEGER NOT NULL DEFAULT 0;
