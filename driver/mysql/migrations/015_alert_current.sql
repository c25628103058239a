-- A firing alert keeps the numbers it fired with (message, vals) and, from
-- the leader's evaluations while it fires, the latest ones: current_message,
-- current_vals and current_at when they last changed. NULL: unchanged
-- since it fired. One statement: it applies whole or not at all.
ALTER TABLE keel_alerts ADD COLUMN current_message TEXT NULL,
    ADD COLUMN current_vals TEXT NULL,
    ADD COLUMN current_at DATETIME(6) NULL;
