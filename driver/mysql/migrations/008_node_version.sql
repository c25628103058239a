-- The node registry shows each worker process's keel version and how many
-- tasks it ran at its last heartbeat.
ALTER TABLE keel_nodes ADD COLUMN version VARCHAR(200) NOT NULL DEFAULT '',
    ADD COLUMN running INT NOT NULL DEFAULT 0;
