-- The node registry shows each worker process's keel version and how many
-- tasks it ran at its last heartbeat.
ALTER TABLE keel_nodes ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE keel_nodes ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
