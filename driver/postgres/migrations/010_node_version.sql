-- The node registry shows each worker process's keel version and how many
-- tasks it ran at its last heartbeat.
ALTER TABLE {schema}.keel_nodes ADD COLUMN version text NOT NULL DEFAULT '',
    ADD COLUMN running integer NOT NULL DEFAULT 0;
