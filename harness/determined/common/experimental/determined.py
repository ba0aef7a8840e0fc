"""``Determined``: the Python SDK's entry point to one master."""

from __future__ import annotations

import logging
import os
import pathlib
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import yaml

from determined.common import errors
from determined.common.experimental import _util
from determined.common.experimental._session import MasterSession
from determined.common.experimental._util import InvalidValue, OrderBy
from determined.common.experimental.checkpoint import Checkpoint
from determined.common.experimental.experiment import (
    Experiment,
    ExperimentSortBy,
    ExperimentState,
)
from determined.common.experimental.metrics import (
    TrainingMetrics,
    TrialMetrics,
    ValidationMetrics,
)
from determined.common.experimental.model import ModelMethods
from determined.common.experimental.trial import Trial
from determined.common.experimental.user import User, check_password_complexity
from determined.common.experimental.workspace import WorkspaceMethods

if TYPE_CHECKING:
    from determined.api.gen import v1


_log = logging.getLogger("determined.experimental")


class Determined(WorkspaceMethods, ModelMethods):
    """A connection to one master, as one user.

    Arguments:
        master: the master's address; default ``DET_MASTER``, else ``localhost:8080``.
        user: who to act as; default ``DET_USER``, else whoever last ran ``det user login``.
        password: log in with it; default the cached session, else ``DET_PASS``.
        cert_path: the CA certificate (PEM) that signed the master's; default
            ``DET_MASTER_CERT_FILE``.
        cert_name: accepted for compatibility; the certificate must name the master's host.
        noverify: accept any certificate from the master.

    Nothing is sent until the first call, which logs in if needed.
    """

    def __init__(
        self,
        master: str | None = None,
        user: str | None = None,
        password: str | None = None,
        cert_path: str | None = None,
        cert_name: str | None = None,
        noverify: bool = False,
    ) -> None:
        self._session = MasterSession(
            master, user, password, cert_path=cert_path, noverify=noverify
        )

    @classmethod
    def _from_session(cls, session: MasterSession) -> Determined:
        """A ``Determined`` on an existing session (as Determined's tests make them)."""
        made = cls.__new__(cls)
        made._session = session
        return made

    @property
    def master(self) -> str:
        """The master's address."""
        return self._session.address

    def close(self) -> None:
        """Close the connection to the master (pydet's)."""
        self._session.close()

    # Users.

    def create_user(
        self, username: str, admin: bool, password: str | None = None, remote: bool = False
    ) -> User:
        """Create a user (admins only). A ``remote`` user signs on through an identity
        provider and has no password; any other needs one of at least 8 characters with an
        upper-case letter, a lower-case letter and a digit.

        Raises:
            ValueError: the password does not meet those requirements.
        """
        from determined.api.gen import v1

        if not remote:
            check_password_complexity(password)
        request = v1.PostUserRequest(
            username=username, password=password or "", admin=admin, remote=remote
        )
        return self._user(self._session.call(lambda stub: stub.post_user(request)).user)

    def get_user_by_id(self, user_id: int) -> User:
        """The user with this id.

        Raises:
            errors.NotFoundException: there is none.
        """
        from determined.api.gen import v1

        request = v1.GetUserRequest(user_id=_id(user_id, "user"))
        return self._user(self._session.call(lambda stub: stub.get_user(request)).user)

    def _user(self, found: v1.User | None) -> User:
        assert found is not None
        return User._from_proto(found, self._session)

    def get_user_by_name(self, user_name: str) -> User:
        """The user with this username.

        Raises:
            errors.NotFoundException: there is none.
        """
        from determined.api.gen import v1

        request = v1.GetUserByUsernameRequest(username=user_name)
        return self._user(self._session.call(lambda stub: stub.get_user_by_username(request)).user)

    def whoami(self) -> User:
        """The user the calls run as."""
        from determined.api.gen import v1

        return self._user(self._session.call(lambda stub: stub.get_me(v1.GetMeRequest())).user)

    def get_session_username(self) -> str:
        """The name of the user the calls run as (logging in first if needed)."""
        return self._session.logged_in_user()

    def logout(self) -> None:
        """End this session on the master and forget its cached token, as
        ``det user logout`` does."""
        self._session.logout()

    def list_users(self, active: bool | None = None) -> list[User]:
        """Every user; with ``active``, only the active (True) or deactivated (False) ones."""
        from determined.api.gen import v1

        request = v1.GetUsersRequest(active=active)
        found = self._session.call(lambda stub: stub.get_users(request)).users
        return [User._from_proto(u, self._session) for u in found]

    # Experiments.

    def create_experiment(
        self,
        config: str | pathlib.Path | dict[str, Any],
        model_dir: str | os.PathLike[str] | None = None,
        includes: Iterable[str | os.PathLike[str]] | None = None,
        project_id: int | None = None,
        template: str | None = None,
        *,
        parent_id: int | None = None,
        activate: bool = True,
    ) -> Experiment:
        """Create an experiment from ``config`` (a dict, a path to a YAML file, or YAML text)
        and the code in ``model_dir`` plus ``includes``, packed as ``det experiment create``
        packs them (``.detignore`` applies); ``template`` names a template (``det template``)
        the config is merged over. pydet's: ``activate=False`` creates it paused;
        ``parent_id`` makes it a fork of that experiment. ``project_id`` is accepted for
        compatibility (pydet's projects are named in the config).

        Raises:
            errors.InvalidArgument: the config or the directory cannot be used.
        """
        from determined.api.gen import v1
        from determined.common import structs
        from determined.common.context import pack_context

        text = _config_text(config)
        if template is not None:
            # The master merges the config over the template it names.
            raw = yaml.safe_load(text) or {}
            if not isinstance(raw, dict):
                raise errors.InvalidArgument("config: expected a mapping")
            text = yaml.safe_dump({**raw, "template": template}, sort_keys=False)
        if model_dir is None and includes:
            raise errors.InvalidArgument("includes need a model_dir to add them to")
        if model_dir is None:
            # No code to upload (the entrypoint is in the image): an empty context.
            with tempfile.TemporaryDirectory() as empty:
                context = pack_context(empty)
        else:
            context = pack_context(model_dir, includes=list(includes or []))
        request = v1.CreateExperimentRequest(
            config=text,
            context=context,
            activate=activate,
            parent_id=parent_id or 0,
            project_id=project_id or 0,
        )
        resp = self._session.call(lambda stub: stub.create_experiment(request))
        if resp.experiment is None:
            raise errors.DetError("the master's answer carries no experiment")
        for warning in resp.warning_messages:  # as Determined's SDK: said, not raised
            _log.warning("experiment %d: %s", resp.experiment.id, warning)
        exp = Experiment._from_proto(self._session, resp.experiment)

        exp.config = structs.python(resp.config)
        return exp

    def get_experiment(self, experiment_id: int) -> Experiment:
        """The experiment with this id.

        Raises:
            errors.NotFoundException: there is none.
        """
        exp = Experiment(_id(experiment_id, "experiment"), self._session)
        exp.reload()
        return exp

    def list_experiments(
        self,
        sort_by: ExperimentSortBy | None = None,
        order_by: OrderBy | None = None,
        experiment_ids: Sequence[int] | None = None,
        labels: Sequence[str] | None = None,
        users: Sequence[str] | None = None,
        states: Sequence[ExperimentState] | None = None,
        name: str | None = None,
        project_id: int | None = None,
        *,
        archived: bool | None = None,
    ) -> list[Experiment]:
        """Experiments matching every filter given (all, by default), sorted by ``sort_by``
        (default: id) in ``order_by`` order: only those with these ids, with a label in
        ``labels``, owned by ``users``, in ``states``, whose name contains ``name``; pydet's
        ``archived`` keeps only archived (True) or unarchived (False) ones. ``project_id``
        is accepted for compatibility."""
        from determined.api.gen import v1

        request = v1.GetExperimentsRequest(
            states=[v1.State[s.name] for s in states or []],
            name=name or "",
            archived=archived,
            users=list(users or []),
            project_id=project_id or 0,
        )
        found = self._session.call(lambda stub: stub.get_experiments(request)).experiments
        keep = [
            e
            for e in found
            if (experiment_ids is None or e.id in experiment_ids)
            and (labels is None or set(labels) & set(e.labels))
        ]
        key = _EXPERIMENT_KEYS.get(
            sort_by or ExperimentSortBy.ID, _EXPERIMENT_KEYS[ExperimentSortBy.ID]
        )
        have = [e for e in keep if key(e) is not None]
        lack = [e for e in keep if key(e) is None]
        have.sort(key=lambda e: (key(e), e.id), reverse=_util.descending(order_by))
        return [Experiment._from_proto(self._session, e) for e in have + lack]

    def get_trial(self, trial_id: int) -> Trial:
        """The trial with this id.

        Raises:
            errors.NotFoundException: there is none.
        """
        trial = Trial(_id(trial_id, "trial"), self._session)
        trial.reload()
        return trial

    def get_checkpoint(self, uuid: str) -> Checkpoint:
        """The checkpoint with this UUID.

        Raises:
            errors.NotFoundException: there is none.
        """
        if not isinstance(uuid, str) or not uuid:
            raise InvalidValue(f"a checkpoint UUID is a non-empty string, not {uuid!r}")
        ckpt = Checkpoint(self._session, uuid)
        ckpt.reload()
        return ckpt

    # Metrics of several trials.

    def iter_trials_metrics(self, trial_ids: list[int], group: str) -> Iterator[TrialMetrics]:
        """The reports in ``group`` ("training", "validation", or any group the trials'
        code reported with ``report_metrics``) of each trial, in trial id then step order.

        Raises:
            errors.NotFoundException: a trial does not exist (its id is named).
        """
        from determined.common.experimental import trial

        return trial.iter_trials_metrics(self._session, trial_ids, group)

    def stream_trials_metrics(self, trial_ids: list[int], group: str) -> Iterator[TrialMetrics]:
        """Deprecated: ``iter_trials_metrics``."""
        _util.deprecated("Determined.stream_trials_metrics", "Determined.iter_trials_metrics")
        return self.iter_trials_metrics(trial_ids, group=group)

    def stream_trials_training_metrics(self, trial_ids: list[int]) -> Iterator[TrainingMetrics]:
        """Deprecated: ``iter_trials_metrics(trial_ids, group="training")``."""
        from determined.common.experimental import trial

        _util.deprecated(
            "Determined.stream_trials_training_metrics",
            "Determined.iter_trials_metrics with `group` set to 'training'",
        )
        return trial.stream_legacy(self._session, trial_ids, TrainingMetrics)  # type: ignore[return-value]

    def stream_trials_validation_metrics(self, trial_ids: list[int]) -> Iterator[ValidationMetrics]:
        """Deprecated: ``iter_trials_metrics(trial_ids, group="validation")``."""
        from determined.common.experimental import trial

        _util.deprecated(
            "Determined.stream_trials_validation_metrics",
            "Determined.iter_trials_metrics with `group` set to 'validation'",
        )
        return trial.stream_legacy(self._session, trial_ids, ValidationMetrics)  # type: ignore[return-value]


def _by_id(e: v1.Experiment) -> int:
    return int(e.id)


# PROJECT_ID, CHECKPOINT_SIZE and CHECKPOINT_COUNT sort by id (pydet has no projects yet,
# and an experiment's checkpoints are not counted in its list).
_EXPERIMENT_KEYS: dict[ExperimentSortBy, Any] = {
    ExperimentSortBy.ID: _by_id,
    ExperimentSortBy.DESCRIPTION: lambda e: e.description,
    ExperimentSortBy.START_TIME: lambda e: e.start_time,
    ExperimentSortBy.END_TIME: lambda e: e.end_time,
    ExperimentSortBy.STATE: lambda e: int(e.state),
    ExperimentSortBy.NUM_TRIALS: lambda e: e.num_trials,
    ExperimentSortBy.PROGRESS: lambda e: e.progress,
    ExperimentSortBy.USER: lambda e: e.username,
    ExperimentSortBy.NAME: lambda e: e.name,
    ExperimentSortBy.FORKED_FROM: lambda e: e.parent_id or None,
    ExperimentSortBy.RESOURCE_POOL: lambda e: e.resource_pool,
    ExperimentSortBy.SEARCHER_METRIC_VAL: lambda e: e.best_searcher_metric,
}


def _id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidValue(f"a {what} id is a positive integer, not {value!r}")
    return value


def _config_text(config: str | pathlib.Path | dict[str, Any]) -> str:
    """The YAML text to submit; a str that names an existing file is that file's text."""
    if isinstance(config, dict):
        return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
    if isinstance(config, pathlib.Path) or (
        isinstance(config, str) and "\n" not in config and os.path.isfile(config)
    ):
        try:
            return pathlib.Path(config).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise errors.InvalidArgument(f"cannot read config file {config}: {e}") from None
    if not isinstance(config, str):
        raise errors.InvalidArgument(
            f"config is a dict, a path or YAML text, not {type(config).__name__}"
        )
    try:
        parsed = yaml.safe_load(config)
    except yaml.YAMLError as e:
        raise errors.InvalidArgument(f"config is neither a file nor valid YAML: {e}") from None
    if not isinstance(parsed, dict):
        raise errors.InvalidArgument(f"config file {config} does not exist")
    return config
