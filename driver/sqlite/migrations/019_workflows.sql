-- keel schema for SQLite: task dependencies and workflows (driver.Workflows).
--
-- A task that depends on others is inserted pending with run_at at
-- driver.HeldUntil, which no claim reaches, and one row in keel_waits. The
-- leader reads the wait rows with their dependencies' states (keel_deps)
-- and, in one transaction each, releases the task (run_at = now), cancels
-- it (a dependency died or was cancelled) or drops a row whose task is no
-- longer held; the row goes with the decision. keel_tasks gets no column:
-- its hot path writes nothing more.
CREATE TABLE keel_workflows (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    on_failure TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);

-- A workflow's tasks by name.
CREATE TABLE keel_workflow_tasks (
    workflow_id INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    task_id     INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, name)
);
CREATE INDEX keel_workflow_tasks_task ON keel_workflow_tasks (task_id);

-- Every dependency, kept for the graph after the wait is over.
CREATE TABLE keel_deps (
    task_id INTEGER NOT NULL,
    dep_id  INTEGER NOT NULL,
    PRIMARY KEY (task_id, dep_id)
);
CREATE INDEX keel_deps_dep ON keel_deps (dep_id);

-- One row per held task, deleted when it is released or cancelled.
CREATE TABLE keel_waits (
    task_id    INTEGER PRIMARY KEY,
    on_failure TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
