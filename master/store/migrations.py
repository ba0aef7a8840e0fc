"""Schema migrations, applied in order; never edit one that has shipped, append a new one.

A migration is an SQL script, or a coroutine given the connection for the few that need
Python; each runs in one transaction with its version's row. They are written once, in
SQLite's dialect, for both stores: on PostgreSQL the scripts' column types and the
statements are rewritten (master/store/dialect.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from pydet.master.store.report_merge import fold


class Connection(Protocol):
    """What a Python migration runs its statements on (master/store/db.py's connections)."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...


Migration = str | Callable[[Connection], Awaitable[None]]


async def _one_report_per_step(conn: Connection) -> None:
    """Reports of one trial, run, group and step become one (retries had stored some twice;
    reports of different metrics at one step are folded together, as new ones now are),
    and the store keeps it so from now on."""
    rows = await conn.fetch_all(
        "SELECT m.id, m.trial_id, m.run_id, m.grp, m.steps_completed, m.metrics,"
        " m.batch_metrics FROM metrics m JOIN (SELECT trial_id, run_id, grp, steps_completed"
        " FROM metrics GROUP BY trial_id, run_id, grp, steps_completed HAVING COUNT(*) > 1)"
        " AS twice USING (trial_id, run_id, grp, steps_completed) ORDER BY m.id"
    )
    first: dict[tuple[int, int, str, int], tuple[int, str, str]] = {}
    folded: set[int] = set()
    doomed = []
    for row_id, trial_id, run_id, grp, steps, metrics, batch_metrics in rows:
        key = (trial_id, run_id, grp, steps)
        if key not in first:
            first[key] = (row_id, metrics, batch_metrics)
            continue
        kept_id, kept_metrics, kept_batches = first[key]
        doomed.append((row_id,))
        merged = fold(kept_metrics, kept_batches, metrics, batch_metrics)
        if merged is not None:
            first[key] = (kept_id, merged.metrics, merged.batch_metrics)
            folded.add(kept_id)
    await conn.execute_many(
        "UPDATE metrics SET metrics = ?, batch_metrics = ? WHERE id = ?",
        [(m, b, row_id) for row_id, m, b in first.values() if row_id in folded],
    )
    await conn.execute_many("DELETE FROM metrics WHERE id = ?", doomed)
    # The unique index serves the reads the old one did (a trial's group in step order).
    await conn.execute("DROP INDEX metrics_trial")
    await conn.execute(
        "CREATE UNIQUE INDEX metrics_report ON metrics (trial_id, grp, steps_completed, run_id)"
    )


MIGRATIONS: list[Migration] = [
    # 1: the initial schema.
    """
    CREATE TABLE cluster (key TEXT PRIMARY KEY, value TEXT NOT NULL);

    CREATE TABLE experiments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL DEFAULT '',
        description TEXT NOT NULL DEFAULT '',
        labels TEXT NOT NULL DEFAULT '[]',
        state TEXT NOT NULL,
        config TEXT NOT NULL,
        original_config TEXT NOT NULL,
        username TEXT NOT NULL DEFAULT '',
        archived INTEGER NOT NULL DEFAULT 0,
        start_time REAL NOT NULL,
        end_time REAL,
        progress REAL NOT NULL DEFAULT 0,
        parent_id INTEGER,
        job_id TEXT NOT NULL,
        searcher_state TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX experiments_state ON experiments (state);

    CREATE TABLE contexts (
        experiment_id INTEGER PRIMARY KEY REFERENCES experiments (id) ON DELETE CASCADE,
        data BLOB NOT NULL
    );

    CREATE TABLE trials (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
        request_id TEXT NOT NULL,
        state TEXT NOT NULL,
        hparams TEXT NOT NULL,
        seed INTEGER NOT NULL,
        restarts INTEGER NOT NULL DEFAULT 0,
        run_id INTEGER NOT NULL DEFAULT 0,
        steps_completed INTEGER NOT NULL DEFAULT 0,
        start_time REAL NOT NULL,
        end_time REAL,
        latest_checkpoint TEXT,
        best_validation REAL,
        latest_validation TEXT NOT NULL DEFAULT '{}',
        searcher_length INTEGER NOT NULL DEFAULT 0,
        completed_length INTEGER NOT NULL DEFAULT 0,
        searcher_closed INTEGER NOT NULL DEFAULT 0,
        progress REAL NOT NULL DEFAULT 0,
        early_exit TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX trials_experiment ON trials (experiment_id);

    CREATE TABLE allocations (
        id TEXT PRIMARY KEY,
        trial_id INTEGER REFERENCES trials (id) ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        state TEXT NOT NULL,
        containers TEXT NOT NULL,
        token TEXT NOT NULL,
        preemption_acked INTEGER NOT NULL DEFAULT 0,
        start_time REAL NOT NULL,
        end_time REAL,
        exit_reason TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX allocations_state ON allocations (state);

    CREATE TABLE task_logs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        trial_id INTEGER,
        task_id TEXT NOT NULL,
        allocation_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        container_id TEXT NOT NULL DEFAULT '',
        rank INTEGER,
        level TEXT NOT NULL DEFAULT '',
        stdtype TEXT NOT NULL DEFAULT '',
        timestamp REAL NOT NULL,
        message TEXT NOT NULL
    );
    CREATE INDEX task_logs_trial ON task_logs (trial_id, id);

    CREATE TABLE metrics (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        trial_id INTEGER NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
        run_id INTEGER NOT NULL DEFAULT 0,
        grp TEXT NOT NULL,
        steps_completed INTEGER NOT NULL,
        metrics TEXT NOT NULL,
        batch_metrics TEXT NOT NULL DEFAULT '',
        timestamp REAL NOT NULL
    );
    CREATE INDEX metrics_trial ON metrics (trial_id, grp, steps_completed);

    CREATE TABLE checkpoints (
        uuid TEXT PRIMARY KEY,
        trial_id INTEGER,
        experiment_id INTEGER,
        allocation_id TEXT NOT NULL DEFAULT '',
        task_id TEXT NOT NULL DEFAULT '',
        steps_completed INTEGER NOT NULL,
        metadata TEXT NOT NULL,
        resources TEXT NOT NULL,
        size INTEGER NOT NULL,
        state TEXT NOT NULL,
        report_time REAL NOT NULL,
        storage TEXT NOT NULL
    );
    CREATE INDEX checkpoints_trial ON checkpoints (trial_id);
    """,
    # 2: queue positions set by users.
    """
    ALTER TABLE experiments ADD COLUMN queue_order REAL NOT NULL DEFAULT 0;
    """,
    # 3: users and their sessions (only token digests are kept).
    """
    CREATE TABLE users (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        username TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        admin INTEGER NOT NULL DEFAULT 0,
        active INTEGER NOT NULL DEFAULT 1,
        modified_at REAL NOT NULL
    );
    CREATE TABLE sessions (
        token_digest TEXT PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE INDEX sessions_user ON sessions (user_id);
    """,
    # 4: each trial's lifecycle phase (master/experiments/trial_lifecycle.py). Older stores
    # kept it in the state, the searcher's lengths, searcher_closed and whether an allocation
    # ran; this derives it from them once. searcher_closed is no longer written.
    """
    ALTER TABLE trials ADD COLUMN phase TEXT NOT NULL DEFAULT 'QUEUED';
    UPDATE trials SET phase = CASE
        WHEN state = 'COMPLETED' THEN 'COMPLETED'
        WHEN state = 'CANCELED' THEN 'CANCELED'
        WHEN state = 'ERROR' THEN 'ERRORED'
        WHEN searcher_closed = 1 THEN 'CLOSING'
        WHEN EXISTS (
            SELECT 1 FROM allocations a WHERE a.trial_id = trials.id AND a.state = 'RUNNING'
        ) THEN CASE
            WHEN searcher_length > 0 AND completed_length >= searcher_length THEN 'REPORTED'
            WHEN completed_length > 0 THEN 'PROMOTED'
            ELSE 'RUNNING'
        END
        WHEN searcher_length > 0 AND completed_length >= searcher_length THEN CASE
            WHEN state = 'PAUSED' THEN 'PAUSED_AWAITING_VERDICT'
            ELSE 'AWAITING_VERDICT'
        END
        WHEN state = 'PAUSED' THEN 'PAUSED'
        ELSE 'QUEUED'
    END;
    """,
    # 5: jobs are found by id (queue updates, their authorization).
    """
    CREATE INDEX experiments_job ON experiments (job_id);
    """,
    # 6: one report per trial, run, group and step.
    _one_report_per_step,
    # 7: the checkpoint a warm-started trial began from.
    """
    ALTER TABLE trials ADD COLUMN warm_start_checkpoint TEXT;
    """,
    # 8: webhooks and their triggers (master/webhooks/store.py).
    """
    CREATE TABLE webhooks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        url TEXT NOT NULL,
        webhook_type TEXT NOT NULL,
        mode TEXT NOT NULL
    );
    CREATE TABLE webhook_triggers (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        webhook_id INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
        trigger_type TEXT NOT NULL,
        condition TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX webhook_triggers_webhook ON webhook_triggers (webhook_id);
    """,
    # 9: what the experiment's log policies did to a trial (master/experiments/log_policies.py).
    """
    ALTER TABLE trials ADD COLUMN log_signal TEXT;
    ALTER TABLE trials ADD COLUMN excluded_agents TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE trials ADD COLUMN cancel_retries_run INTEGER NOT NULL DEFAULT 0;
    """,
    # 10: a warm-started search's imported trials (master/experiments/warm_start.py).
    """
    CREATE TABLE imported_trials (
        experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
        source_experiment_id INTEGER NOT NULL,
        source_trial_id INTEGER NOT NULL,
        hparams TEXT NOT NULL,
        latest_validation TEXT NOT NULL,
        best_validation REAL,
        steps_completed INTEGER NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (experiment_id, source_trial_id)
    );
    """,
    # 11: the trial a PBT child forked from (its checkpoint is warm_start_checkpoint).
    """
    ALTER TABLE trials ADD COLUMN parent_trial_id INTEGER;
    """,
    # 12: templates, config fragments experiments are merged over (master/experiments/templates.py).
    """
    CREATE TABLE templates (
        name TEXT PRIMARY KEY,
        config TEXT NOT NULL,
        username TEXT NOT NULL
    );
    """,
    # 13: experiments a script off the cluster reports into (core_v2's unmanaged runs).
    """
    ALTER TABLE experiments ADD COLUMN unmanaged INTEGER NOT NULL DEFAULT 0;
    """,
    # 14: what a trial's code set with core_context.train.set_metadata().
    """
    ALTER TABLE trials ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
    """,
    # 15: an unmanaged run's own names for its experiment and trial, to resume them.
    """
    ALTER TABLE experiments ADD COLUMN external_id TEXT;
    ALTER TABLE trials ADD COLUMN external_id TEXT;
    CREATE INDEX experiments_external ON experiments (username, external_id);
    """,
    # 16: reports of an earlier run past the checkpoint a new run starts from (archived, as
    # Determined archives them: the new run reports those steps again).
    """
    ALTER TABLE metrics ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
    """,
    # 17: TensorBoard tasks (master/tasks/tensorboards.py).
    """
    CREATE TABLE tensorboards (
        id TEXT PRIMARY KEY,
        username TEXT NOT NULL,
        experiment_ids TEXT NOT NULL,
        trial_ids TEXT NOT NULL,
        sources TEXT NOT NULL,
        resource_pool TEXT NOT NULL,
        state TEXT NOT NULL,
        exit_status TEXT NOT NULL DEFAULT '',
        start_time REAL NOT NULL,
        end_time REAL
    );
    """,
    # 18: the Slurm job of each allocation on a slurm pool, stored as soon as sbatch answers
    # (master/slurm/pool.py adopts it after a restart).
    """
    CREATE TABLE slurm_jobs (
        allocation_id TEXT PRIMARY KEY,
        pool TEXT NOT NULL,
        job_id INTEGER NOT NULL,
        submit_time REAL NOT NULL
    );
    """,
    # 19: an experiment's summary (GetExperiment, the experiment list) counts its trials, its
    # best validation and its trials' phases. From the trials table itself that read every
    # trial's row four times: 17 ms for 10,000 trials, at each poll of the WebUI or the CLI.
    # From these two indexes it reads neither row: under a millisecond.
    """
    CREATE INDEX trials_experiment_phase ON trials (experiment_id, phase);
    CREATE INDEX trials_experiment_best ON trials (experiment_id, best_validation);
    """,
    # 20: what the searcher keeps about each unfinished trial (search/base.py), saved on
    # the trial's row when it changes: '' for none.
    """
    ALTER TABLE trials ADD COLUMN searcher_record TEXT NOT NULL DEFAULT '';
    """,
    # 21: what the Python SDK reads and sets beyond the CLI: a user's display name, remote
    # sign-on and agent user and group; an experiment's notes; and which trials used which
    # checkpoint (core_context.experimental.report_task_using_checkpoint).
    """
    ALTER TABLE users ADD COLUMN display_name TEXT NOT NULL DEFAULT '';
    ALTER TABLE users ADD COLUMN remote INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE users ADD COLUMN agent_uid INTEGER;
    ALTER TABLE users ADD COLUMN agent_gid INTEGER;
    ALTER TABLE users ADD COLUMN agent_user TEXT;
    ALTER TABLE users ADD COLUMN agent_group TEXT;
    ALTER TABLE experiments ADD COLUMN notes TEXT NOT NULL DEFAULT '';
    CREATE TABLE trial_source_infos (
        trial_id INTEGER NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
        checkpoint_uuid TEXT NOT NULL,
        source_type TEXT NOT NULL,
        model_id INTEGER,
        model_version INTEGER,
        PRIMARY KEY (trial_id, checkpoint_uuid, source_type)
    );
    CREATE INDEX trial_source_infos_checkpoint ON trial_source_infos (checkpoint_uuid);
    """,
    # 22: where teams keep their work (master/workspaces/, master/models/): workspaces, their
    # projects, the model registry. The default workspace and project ("Uncategorized", the
    # first rows: id 1, owned by no user) hold every experiment already stored and every new
    # one that names no project. A project's page of experiments is read by
    # experiments_project, and its counts (experiments, active ones, the last start) from
    # experiments_project_state alone: 10 projects of 1,000 experiments listed in 17 ms
    # instead of 140. A checkpoint's model versions (kept from garbage collection) are read
    # by model_versions_checkpoint.
    """
    CREATE TABLE workspaces (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        user_id INTEGER REFERENCES users (id) ON DELETE SET NULL,
        archived INTEGER NOT NULL DEFAULT 0,
        immutable INTEGER NOT NULL DEFAULT 0,
        checkpoint_storage TEXT,
        default_compute_pool TEXT NOT NULL DEFAULT '',
        default_aux_pool TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    );
    CREATE TABLE projects (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        workspace_id INTEGER NOT NULL REFERENCES workspaces (id),
        name TEXT NOT NULL,
        key TEXT NOT NULL UNIQUE,
        description TEXT NOT NULL DEFAULT '',
        notes TEXT NOT NULL DEFAULT '[]',
        user_id INTEGER REFERENCES users (id) ON DELETE SET NULL,
        archived INTEGER NOT NULL DEFAULT 0,
        immutable INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        UNIQUE (workspace_id, name)
    );
    INSERT INTO workspaces (name, immutable, created_at) VALUES ('Uncategorized', 1, 0);
    INSERT INTO projects (workspace_id, name, key, immutable, created_at)
        VALUES (1, 'Uncategorized', 'UNCAT', 1, 0);
    ALTER TABLE experiments ADD COLUMN project_id INTEGER NOT NULL DEFAULT 1;
    CREATE INDEX experiments_project ON experiments (project_id, id);
    CREATE INDEX experiments_project_state ON experiments (project_id, state, start_time);
    CREATE TABLE models (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        description TEXT NOT NULL DEFAULT '',
        metadata TEXT NOT NULL DEFAULT '{}',
        labels TEXT NOT NULL DEFAULT '[]',
        notes TEXT NOT NULL DEFAULT '',
        user_id INTEGER REFERENCES users (id) ON DELETE SET NULL,
        workspace_id INTEGER NOT NULL DEFAULT 1 REFERENCES workspaces (id),
        archived INTEGER NOT NULL DEFAULT 0,
        creation_time REAL NOT NULL,
        last_updated_time REAL NOT NULL
    );
    CREATE INDEX models_workspace ON models (workspace_id);
    CREATE TABLE model_versions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        model_id INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
        version INTEGER NOT NULL,
        checkpoint_uuid TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        comment TEXT NOT NULL DEFAULT '',
        notes TEXT NOT NULL DEFAULT '',
        labels TEXT NOT NULL DEFAULT '[]',
        metadata TEXT NOT NULL DEFAULT '{}',
        user_id INTEGER REFERENCES users (id) ON DELETE SET NULL,
        creation_time REAL NOT NULL,
        last_updated_time REAL NOT NULL,
        UNIQUE (model_id, version)
    );
    CREATE INDEX model_versions_checkpoint ON model_versions (checkpoint_uuid);
    """,
    # 23: what admins set at run time for the whole cluster (issue 34): the cluster-wide
    # message (master/cluster/messages.py; a new one ends the one before, so the newest row is
    # the message), the config policies of each workload type (master/cluster/policies.py;
    # workspace_id 0 is the global scope), and the log retention set on a trial after it was
    # created (`det experiment|trial set log-retention`; NULL: its experiment's or the master's).
    """
    CREATE TABLE cluster_messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        message TEXT NOT NULL,
        start_time REAL NOT NULL,
        end_time REAL,
        created_time REAL NOT NULL,
        created_by TEXT NOT NULL
    );
    CREATE TABLE config_policies (
        workspace_id INTEGER NOT NULL DEFAULT 0,
        workload_type TEXT NOT NULL,
        invariant_config TEXT,
        constraints TEXT,
        updated_by TEXT NOT NULL,
        updated_time REAL NOT NULL,
        PRIMARY KEY (workspace_id, workload_type)
    );
    ALTER TABLE trials ADD COLUMN log_retention_days INTEGER;
    """,
    # 24: every task that is not a trial (TensorBoards, commands, notebooks, shells) in one
    # table (master/tasks/generic.py), with what it needs to survive a master restart: its
    # allocation, the ports declared for it and the address it serves on. A task's lines are
    # read by its id.
    """
    CREATE TABLE generic_tasks (
        id TEXT PRIMARY KEY,
        task_type TEXT NOT NULL,
        username TEXT NOT NULL,
        description TEXT NOT NULL,
        config TEXT NOT NULL DEFAULT '{}',
        context BLOB,
        resource_pool TEXT NOT NULL,
        slots INTEGER NOT NULL DEFAULT 0,
        priority INTEGER NOT NULL DEFAULT 42,
        state TEXT NOT NULL,
        exit_status TEXT NOT NULL DEFAULT '',
        exit_code INTEGER,
        start_time REAL NOT NULL,
        end_time REAL,
        allocation_id TEXT NOT NULL DEFAULT '',
        ports TEXT NOT NULL DEFAULT '[]',
        proxy_address TEXT NOT NULL DEFAULT '',
        proxy_user TEXT NOT NULL DEFAULT '',
        extra TEXT NOT NULL DEFAULT '{}'
    );
    INSERT INTO generic_tasks (id, task_type, username, description, resource_pool, state,
        exit_status, start_time, end_time, extra)
    SELECT id, 'TENSORBOARD', username, 'TensorBoard (' || substr(id, 1, 8) || ')',
        resource_pool, state, exit_status, start_time, end_time,
        '{"experiment_ids": ' || experiment_ids || ', "trial_ids": ' || trial_ids
        || ', "sources": ' || sources || '}'
    FROM tensorboards;
    DROP TABLE tensorboards;
    CREATE INDEX generic_tasks_state ON generic_tasks (state);
    CREATE INDEX task_logs_task ON task_logs (task_id, id);
    """,
    # 25: resource pools bound to workspaces (master/workspaces/pool_bindings.py): a bound
    # pool runs only its workspaces' experiments and tasks; a pool with no row is shared.
    """
    CREATE TABLE rp_workspace_bindings (
        pool_name TEXT NOT NULL,
        workspace_id INTEGER NOT NULL,
        PRIMARY KEY (pool_name, workspace_id)
    );
    CREATE INDEX rp_workspace_bindings_workspace ON rp_workspace_bindings (workspace_id);
    """,
    # 26: the workspace a template belongs to (det template create -w), as in Determined;
    # the existing ones are the default workspace's.
    """
    ALTER TABLE templates ADD COLUMN workspace_id INTEGER NOT NULL DEFAULT 1;
    """,
    # 27: the agent user and group a workspace's tasks run as (det workspace create|edit
    # --agent-uid ...), over their owners' own (the users' columns of migration 19).
    """
    ALTER TABLE workspaces ADD COLUMN agent_uid INTEGER;
    ALTER TABLE workspaces ADD COLUMN agent_gid INTEGER;
    ALTER TABLE workspaces ADD COLUMN agent_user TEXT;
    ALTER TABLE workspaces ADD COLUMN agent_group TEXT;
    """,
    # 28: user groups, role assignments and access tokens (master/auth/). An assignment is
    # to a user or to a group, cluster-wide (scope_workspace_id NULL) or on one workspace (it
    # goes with the workspace). Admins become ClusterAdmin (role 1), which the admin flag now
    # stands for. Access tokens are kept as SHA-256 digests, never in clear. (A user's
    # display name came with migration 21.)
    """
    CREATE TABLE user_groups (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL
    );
    CREATE TABLE user_group_members (
        group_id INTEGER NOT NULL REFERENCES user_groups (id) ON DELETE CASCADE,
        user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        PRIMARY KEY (group_id, user_id)
    );
    CREATE INDEX user_group_members_user ON user_group_members (user_id);
    CREATE TABLE role_assignments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        role_id INTEGER NOT NULL,
        user_id INTEGER REFERENCES users (id) ON DELETE CASCADE,
        group_id INTEGER REFERENCES user_groups (id) ON DELETE CASCADE,
        scope_workspace_id INTEGER REFERENCES workspaces (id) ON DELETE CASCADE,
        CHECK ((user_id IS NULL) <> (group_id IS NULL))
    );
    CREATE UNIQUE INDEX role_assignments_once ON role_assignments (
        role_id, COALESCE(user_id, 0), COALESCE(group_id, 0), COALESCE(scope_workspace_id, 0)
    );
    CREATE INDEX role_assignments_user ON role_assignments (user_id);
    CREATE INDEX role_assignments_group ON role_assignments (group_id);
    CREATE TABLE access_tokens (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        token_digest TEXT NOT NULL UNIQUE,
        description TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        revoked_at REAL
    );
    CREATE INDEX access_tokens_user ON access_tokens (user_id);
    INSERT INTO role_assignments (role_id, user_id) SELECT 1, id FROM users WHERE admin = 1;
    """,
]
