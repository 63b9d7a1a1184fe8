-- The replay window's length, fixed when a record is first written.
--
-- A window ends later than its first claim + window when an attempt is slow:
-- a completion moves `expires_at` to at least `completed_at + window_ms`, and
-- a record never completed keeps its key until its last lease ended a whole
-- window ago. Both need the length the record was promised, not the class's
-- current one. Records written before this column get the length their
-- `expires_at` was computed with (`created_at` is their first claim).
alter table idempotency_key add column window_ms bigint;

update idempotency_key
   set window_ms = greatest(1000, (extract(epoch from (expires_at - created_at)) * 1000)::bigint);

alter table idempotency_key alter column window_ms set not null;
