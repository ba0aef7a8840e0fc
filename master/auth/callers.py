"""Who is calling: the identities a token can stand for once the master has checked it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UserCaller:
    """A person (CLI, WebUI or SDK) with a session token or an access token. What they may
    do is their roles' business (``grants``), asked at each call: a role assigned or taken
    away counts at once, for sessions already open too."""

    id: int
    username: str
    # The digest of the token, so that Logout can end exactly this session.
    session: str
    # The access token the call came with (its id); 0 for a session.
    access_token: int = 0


@dataclass(frozen=True)
class TaskCaller:
    """A running task with its allocation's token: it may act only on its own allocation,
    its own trial and (for reads) its own experiment."""

    allocation_id: str
    task_id: str
    trial_id: int
    experiment_id: int
    # The checkpoint the run started from (warm start or resume); the task may read it
    # even when another trial wrote it.
    start_checkpoint: str


@dataclass(frozen=True)
class AgentCaller:
    """An agent daemon that presented the cluster's agent token."""


Caller = UserCaller | TaskCaller | AgentCaller
