-- Key events only for keys somebody waits on.
--
-- Until now a trigger sent `pg_notify` on every state change. A transaction
-- that notifies takes a database-wide lock at commit and holds it through
-- its WAL flush, so every completion queued behind every other one: the
-- write path's throughput was capped by one commit at a time, while almost
-- no completion has anyone waiting for it.
--
-- Now a node that is about to let claims wait on a key (`wait_ms`) writes a
-- `key_waiter` row first, valid `until` a little past its longest wait, and
-- the node that changes the key announces the change (`pg_notify`, from its
-- own connection) only when such a row exists. The table is unlogged: its
-- rows matter only while their waiters wait, and a crash ends every wait
-- (listeners reconnect and treat the gap as "anything may have changed").
-- Rows past their `until` are deleted by the lease watch.
create unlogged table key_waiter (
    tenant     text        not null,
    operation  text        not null,
    key        text        not null,
    -- The waiting node's random name: one row per node and key, whatever
    -- the number of claims waiting there.
    node       text        not null,
    until      timestamptz not null,
    created_at timestamptz not null default now(),
    constraint key_waiter_pkey primary key (tenant, operation, key, node)
);

-- The lease watch deletes expired registrations, oldest first.
create index key_waiter_until_idx on key_waiter (until);

-- Whether a node waits on the key. PL/pgSQL and volatile on purpose: each
-- call takes a fresh snapshot, so when a completion's `returning` calls it
-- (after the row is locked and changed), it sees every registration that
-- committed before the row lock was granted, even one that committed after
-- the completion's statement began. A registering node reads the row
-- `for share` in its registration transaction, so a completion either
-- waits for that transaction and sees the row, or finished before it and
-- is seen by the waiter's next read. Never inlined into the caller's
-- snapshot, unlike a SQL-language function.
create function idemkey_waited(t text, o text, k text) returns boolean
language plpgsql volatile as $$
begin
    return exists (
        select 1 from key_waiter
         where tenant = t and operation = o and key = k and until > now());
end
$$;

-- The trigger stays as a safety net for what the service never does
-- itself: a row's window shortened or a completed row deleted inside its
-- window by hand (an operator's fix-up) must still drop every node's cached
-- replay. A renewal (`created_at` changes) keeps notifying too; it is rare,
-- and its node evicts before it anyway. Completions, quarantines, releases
-- and resolves no longer fire it: their nodes announce them when waited on.
drop trigger idempotency_key_changed on idempotency_key;
create trigger idempotency_key_changed
    after update on idempotency_key
    for each row
    when (old.created_at is distinct from new.created_at
          or new.expires_at < old.expires_at)
    execute function idempotency_key_event();

drop trigger idempotency_key_deleted on idempotency_key;
create trigger idempotency_key_deleted
    after delete on idempotency_key
    for each row
    when (old.state = 'completed' and old.expires_at > now())
    execute function idempotency_key_event();
