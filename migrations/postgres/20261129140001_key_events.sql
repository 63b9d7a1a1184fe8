-- Key events: every node learns when a record changes state or disappears.
--
-- A claim waiting for another attempt (`wait_ms`) is woken by these, and
-- every node drops its in-process copy of the key's outcome. A trigger rather
-- than an extra statement in the code: one notification per change whoever
-- made it, sent only when the change commits (NOTIFY is transactional), so a
-- woken waiter always reads the new row.
--
-- The payload is the hex of the first 16 bytes of
-- sha256(tenant || '/' || operation || '/' || key), which the server computes
-- the same way (`ScopedKey::hash`): it names the key without carrying it.
-- Neither a tenant nor an operation can contain '/', so the join is
-- unambiguous.
--
-- Only changes a waiter or a cache cares about notify: a state change
-- (completed, quarantined), a rewrite after the window (`created_at` changes
-- then), a changed window (`expires_at`: only a renewal does that today, but
-- an operator's fix-up by hand must not leave stale cached replays) and a
-- delete (release). Heartbeats and takeovers do not.
create function idempotency_key_event() returns trigger
language plpgsql as $$
declare
    r idempotency_key;
begin
    if tg_op = 'DELETE' then
        r := old;
    else
        r := new;
    end if;
    perform pg_notify(
        'idemkey_key_events',
        encode(substr(sha256(convert_to(r.tenant || '/' || r.operation || '/' || r.key, 'UTF8')), 1, 16), 'hex'));
    return null;
end
$$;

create trigger idempotency_key_changed
    after update on idempotency_key
    for each row
    when (old.state is distinct from new.state
          or old.created_at is distinct from new.created_at
          or old.expires_at is distinct from new.expires_at)
    execute function idempotency_key_event();

create trigger idempotency_key_deleted
    after delete on idempotency_key
    for each row
    execute function idempotency_key_event();
