-- A firing alert keeps the numbers it fired with (message, vals) and, from
-- the leader's evaluations while it fires, the latest ones: current_message,
-- current_vals and current_at (Unix microseconds) when they last changed.
-- NULL: unchanged since it fired.
ALTER TABLE keel_alerts ADD COLUMN current_message TEXT;
ALTER TABLE keel_alerts ADD COLUMN current_vals TEXT;
ALTER TABLE keel_alerts ADD COLUMN current_at INTEGER;
