-- The replay window's length, fixed when a record is first written (see the
-- Postgres migration of the same name). Times here are epoch milliseconds.
alter table idempotency_key add column window_ms integer not null default 0;

update idempotency_key set window_ms = max(1000, expires_at - created_at);
