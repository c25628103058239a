-- A firing alert keeps the numbers it fired with (message, vals) and, from
-- the leader's evaluations while it fires, the latest ones: current_message,
-- current_vals and current_at when they last changed. NULL: unchanged
-- since it fired.
ALTER TABLE {schema}.keel_alerts ADD COLUMN current_message text,
    ADD COLUMN current_vals text,
    ADD COLUMN current_at timestamptz;
