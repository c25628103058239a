-- keel schema v1 for PostgreSQL. {schema} is replaced by the quoted schema name.
CREATE TABLE {schema}.keel_tasks (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue            text        NOT NULL,
    type             text        NOT NULL,
    priority         integer     NOT NULL DEFAULT 0,
    payload          jsonb       NOT NULL,
    state            text        NOT NULL,
    attempt          integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    fence            bigint      NOT NULL DEFAULT 0, -- claims so far; never reset
    run_at           timestamptz NOT NULL,
    timeout_ms       bigint      NOT NULL,
    idem_key         text,
    payload_digest   text        NOT NULL,
    lease_owner      text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    attempted_at     timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL,
    errors           jsonb       NOT NULL DEFAULT '[]',
    result           jsonb,
    meta             jsonb
);

-- The claim path reads only pending rows; finished rows never slow it.
CREATE INDEX keel_tasks_claim ON {schema}.keel_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'pending';

-- The rescuer reads only running rows.
CREATE INDEX keel_tasks_lease ON {schema}.keel_tasks (lease_expires_at)
    WHERE state = 'running';

-- The final arbiter of idempotency: a key is held while pending, running or
-- succeeded; dead and cancelled release it.
CREATE UNIQUE INDEX keel_tasks_idem ON {schema}.keel_tasks (idem_key)
    WHERE idem_key IS NOT NULL AND state IN ('pending', 'running', 'succeeded');

-- Dead letters and cancelled tasks are listed by operators.
CREATE INDEX keel_tasks_failed ON {schema}.keel_tasks (state, id)
    WHERE state IN ('dead', 'cancelled');

CREATE TABLE {schema}.keel_leaders (
    name       text        PRIMARY KEY,
    owner      text        NOT NULL,
    expires_at timestamptz NOT NULL
);
