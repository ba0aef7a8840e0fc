"""``Determined``: the Python SDK's entry point to one master."""

from __future__ import annotations

import logging
import os
import pathlib
import tempfile
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import yaml

from determined.common import errors
from determined.common.experimental._session import MasterSession
from determined.common.experimental.checkpoint import Checkpoint
from determined.common.experimental.experiment import Experiment, ExperimentState
from determined.common.experimental.trial import Trial

if TYPE_CHECKING:
    from determined.api.gen import v1


_log = logging.getLogger("determined.experimental")


class Determined:
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

    @property
    def master(self) -> str:
        """The master's address."""
        return self._session.address

    def close(self) -> None:
        """Close the connection to the master."""
        self._session.close()

    def create_experiment(
        self,
        config: str | pathlib.Path | dict[str, Any],
        model_dir: str | os.PathLike[str] | None = None,
        includes: Iterable[str | os.PathLike[str]] | None = None,
        parent_id: int | None = None,
        project_id: int | None = None,
        template: str | None = None,
        *,
        activate: bool = True,
    ) -> Experiment:
        """Create an experiment from ``config`` (a dict, a path to a YAML file, or YAML text)
        and the code in ``model_dir`` plus ``includes``, packed as ``det experiment create``
        packs them (``.detignore`` applies). ``activate=False`` creates it paused;
        ``template`` names a template (``det template``) the config is merged over.

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
            config=text, context=context, activate=activate, parent_id=parent_id or 0
        )
        resp = self._session.call(lambda stub: stub.create_experiment(request))
        if resp.experiment is None:
            raise errors.DetError("the master's answer carries no experiment")
        for warning in resp.warning_messages:  # as Determined's SDK: said, not raised
            _log.warning("experiment %d: %s", resp.experiment.id, warning)
        exp = Experiment(resp.experiment.id, self._session)
        exp._hydrate(resp.experiment)
        exp.config = structs.python(resp.config)
        return exp

    def get_experiment(self, experiment_id: int) -> Experiment:
        """The experiment with this id.

        Raises:
            errors.NotFound: there is none.
        """
        exp = Experiment(_id(experiment_id, "experiment"), self._session)
        exp.reload()
        return exp

    def list_experiments(
        self,
        experiment_ids: Sequence[int] | None = None,
        labels: Sequence[str] | None = None,
        users: Sequence[str] | None = None,
        states: Sequence[ExperimentState] | None = None,
        name: str | None = None,
        project_id: int | None = None,
        archived: bool | None = None,
    ) -> list[Experiment]:
        """Experiments matching every filter given (all, by default), oldest first."""
        from determined.api.gen import v1

        request = v1.GetExperimentsRequest(
            states=[v1.State(s.value) for s in states or []],
            name=name or "",
            archived=archived,
        )
        found = self._session.call(lambda stub: stub.get_experiments(request)).experiments
        out = []
        for e in found:
            if experiment_ids is not None and e.id not in experiment_ids:
                continue
            if labels is not None and not set(labels) & set(e.labels):
                continue
            if users is not None and e.username not in users:
                continue
            exp = Experiment(e.id, self._session)
            exp._hydrate(e)
            out.append(exp)
        return out

    def get_trial(self, trial_id: int) -> Trial:
        """The trial with this id.

        Raises:
            errors.NotFound: there is none.
        """
        trial = Trial(_id(trial_id, "trial"), self._session)
        trial.reload()
        return trial

    def get_checkpoint(self, uuid: str) -> Checkpoint:
        """The checkpoint with this UUID.

        Raises:
            errors.NotFound: there is none.
        """
        if not isinstance(uuid, str) or not uuid:
            raise errors.InvalidArgument(f"a checkpoint UUID is a non-empty string, not {uuid!r}")
        ckpt = Checkpoint(self._session, uuid)
        ckpt.reload()
        return ckpt

    def whoami(self) -> str:
        """The name of the user the calls run as."""
        from determined.api.gen import v1

        resp: v1.GetMeResponse = self._session.call(lambda stub: stub.get_me(v1.GetMeRequest()))
        return resp.user.username if resp.user is not None else ""


def _id(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise errors.InvalidArgument(f"a {what} id is a positive integer, not {value!r}")
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
