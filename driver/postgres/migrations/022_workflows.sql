-- keel schema for PostgreSQL: task dependencies and workflows (driver.Workflows).
--
-- A task that depends on others is inserted pending with run_at at
-- driver.HeldUntil, which no claim reaches, and one row in keel_waits. The
-- leader reads the wait rows with their dependencies' states (keel_deps)
-- and, in one transaction each, releases the task (run_at = now), cancels
-- it (a dependency died or was cancelled) or drops a row whose task is no
-- longer held; the row goes with the decision. keel_tasks gets no column:
-- its hot path writes nothing more.
CREATE TABLE {schema}.keel_workflows (
    id         bigserial   PRIMARY KEY,
    name       text        NOT NULL,
    on_failure text        NOT NULL,
    created_at timestamptz NOT NULL
);

-- A workflow's tasks by name.
CREATE TABLE {schema}.keel_workflow_tasks (
    workflow_id bigint NOT NULL,
    name        text   NOT NULL,
    task_id     bigint NOT NULL,
    PRIMARY KEY (workflow_id, name)
);
CREATE INDEX keel_workflow_tasks_task ON {schema}.keel_workflow_tasks (task_id);

-- Every dependency, kept for the graph after the wait is over.
CREATE TABLE {schema}.keel_deps (
    task_id bigint NOT NULL,
    dep_id  bigint NOT NULL,
    PRIMARY KEY (task_id, dep_id)
);
CREATE INDEX keel_deps_dep ON {schema}.keel_deps (dep_id);

-- One row per held task, deleted when it is released or cancelled.
CREATE TABLE {schema}.keel_waits (
    task_id    bigint      PRIMARY KEY,
    on_failure text        NOT NULL,
    created_at timestamptz NOT NULL
);
