-- Per-field digests of the request a key was first claimed with (JSON text:
-- a short digest per JSON pointer of the protected input, never a value), so
-- a claim refused as `key_reused` can name which fields differ. Null for
-- records written before this column, and for claims that sent a
-- precomputed fingerprint instead of a request.
alter table idempotency_key add column field_digests text;
