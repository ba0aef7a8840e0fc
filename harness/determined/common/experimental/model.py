"""The model registry, as Determined's SDK has it: ``Model`` (a model and its versions,
labels and metadata), ``ModelVersion`` (a registered checkpoint), ``ModelSortBy`` and
``ModelOrderBy``; and the ``Determined`` methods that create, find and list models."""

from __future__ import annotations

import datetime
import enum
import json
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from determined.common import errors, structs
from determined.common.experimental import _util
from determined.common.experimental._util import DeprecatedEnum, OrderBy
from determined.common.experimental.checkpoint import Checkpoint
from determined.common.experimental.project import paged

if TYPE_CHECKING:
    from determined.api.gen import v1
    from determined.common.experimental._session import MasterSession


class ModelSortBy(enum.Enum):
    """Fields a list of models sorts by (Determined's names and values)."""

    NAME = "SORT_BY_NAME"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    CREATION_TIME = "SORT_BY_CREATION_TIME"
    LAST_UPDATED_TIME = "SORT_BY_LAST_UPDATED_TIME"
    NUM_VERSIONS = "SORT_BY_NUM_VERSIONS"
    WORKSPACE = "SORT_BY_WORKSPACE"


class ModelOrderBy(DeprecatedEnum):
    """Deprecated: ``OrderBy``."""

    ASCENDING = "ORDER_BY_ASC"
    ASC = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"
    DESC = "ORDER_BY_DESC"


class ModelVersion:
    """A checkpoint registered as a version of a model.

    Attributes:
        model_version: (int) Its number: 1 for the model's first version, then one more.
        model_name: (str) Its model's name.
        model_id: (int) Its model's ID.
        checkpoint: (Checkpoint) The checkpoint it holds.
        name, comment, notes: (str) What its registrant wrote.
        metadata: (dict) Its metadata.
        labels: (list of str) Its labels.
    """

    def __init__(self, session: MasterSession, model_version: int, model_name: str) -> None:
        self._session = session
        self.model_name = model_name
        self.model_version = model_version
        self.model_id: int | None = None
        self.checkpoint: Checkpoint | None = None
        self.metadata: dict[str, Any] | None = None
        self.name: str | None = None
        self.comment: str | None = None
        self.notes: str | None = None
        self.labels: list[str] | None = None

    def __repr__(self) -> str:
        return f"ModelVersion(model={self.model_name!r}, version={self.model_version})"

    @classmethod
    def _from_proto(cls, v: v1.ModelVersion, session: MasterSession) -> ModelVersion:
        version = cls(session, v.version, v.model.name if v.model else "")
        version._hydrate(v)
        return version

    def _hydrate(self, v: v1.ModelVersion) -> None:
        if v.checkpoint is not None:
            self.checkpoint = Checkpoint._from_proto(self._session, v.checkpoint)
        self.metadata = structs.to_dict(v.metadata) or {}
        self.comment = v.comment or ""
        self.notes = v.notes or ""
        self.labels = list(v.labels)
        self.model_version = v.version
        self.model_id = v.model.id if v.model else None
        self.name = v.name

    def reload(self) -> None:
        """Fetch the version's attributes again."""
        from determined.api.gen import v1

        req = v1.GetModelVersionRequest(
            model_name=self.model_name, model_version_num=self.model_version
        )
        self._hydrate(_present(self._session.call(lambda stub: stub.get_model_version(req))))

    def _patch(self, patch: v1.PatchModelVersion) -> None:
        from determined.api.gen import v1

        req = v1.PatchModelVersionRequest(
            model_name=self.model_name, model_version_num=self.model_version, model_version=patch
        )
        self._hydrate(_present(self._session.call(lambda stub: stub.patch_model_version(req))))

    def set_name(self, name: str) -> None:
        """Set the version's name, here and on the master."""
        from determined.api.gen import v1

        self._patch(v1.PatchModelVersion(name=name))

    def set_notes(self, notes: str) -> None:
        """Replace the version's notes (markdown), here and on the master."""
        from determined.api.gen import v1

        self._patch(v1.PatchModelVersion(notes=notes))

    def delete(self) -> None:
        """Delete this version (its checkpoint is garbage-collected again like any other)."""
        from determined.api.gen import v1

        req = v1.DeleteModelVersionRequest(
            model_name=self.model_name, model_version_num=self.model_version
        )
        self._session.call(lambda stub: stub.delete_model_version(req))


def _present(resp: Any) -> v1.ModelVersion:
    version: v1.ModelVersion | None = resp.model_version
    if version is None:
        raise errors.DetError("the master's answer carries no model version")
    return version


class Model:
    """A model in the registry: ``model_id``, ``name``, ``description``, ``metadata``,
    ``labels``, ``username``, ``workspace_id``, ``archived``, ``creation_time`` and
    ``last_updated_time``; ``reload()`` reads them again.

    Get one from ``client.create_model`` or ``client.get_model``.
    """

    def __init__(self, session: MasterSession, name: str) -> None:
        self._session = session
        self.name = name
        self.model_id: int | None = None
        self.description: str | None = None
        self.creation_time: datetime.datetime | None = None
        self.last_updated_time: datetime.datetime | None = None
        self.metadata: dict[str, Any] | None = None
        self.labels: list[str] | None = None
        self.username: str | None = None
        self.workspace_id: int | None = None
        self.archived: bool | None = None
        self.notes: str | None = None

    def __repr__(self) -> str:
        return f"Model(id={self.model_id}, name={self.name}, metadata={json.dumps(self.metadata)})"

    @classmethod
    def _from_proto(cls, m: v1.Model, session: MasterSession) -> Model:
        model = cls(session, m.name)
        model._hydrate(m)
        return model

    def _hydrate(self, m: v1.Model) -> None:
        self.name = m.name
        self.model_id = m.id
        self.description = m.description or ""
        self.creation_time = m.creation_time
        self.last_updated_time = m.last_updated_time
        self.metadata = structs.to_dict(m.metadata) or {}
        self.labels = list(m.labels)
        self.username = m.username or ""
        self.workspace_id = m.workspace_id
        self.archived = m.archived
        self.notes = m.notes

    def _ref(self) -> str:
        """How requests name the model: by id once known (a rename elsewhere keeps it)."""
        return str(self.model_id) if self.model_id is not None else self.name

    def reload(self) -> None:
        """Fetch the model's attributes again."""
        from determined.api.gen import v1

        resp = self._session.call(
            lambda stub: stub.get_model(v1.GetModelRequest(model_name=self._ref()))
        )
        if resp.model is None:
            raise errors.NotFound(f"model {self.name!r} not found")
        self._hydrate(resp.model)

    def get_version(self, version: int = -1) -> ModelVersion | None:
        """Version ``version`` of the model; with -1, the latest (None if it has none).

        Raises:
            errors.NotFound: the model has no version of that number.
        """
        from determined.api.gen import v1

        if version == -1:
            req = v1.GetModelVersionsRequest(
                model_name=self._ref(),
                limit=1,
                sort_by=v1.GetModelVersionsRequestSortBy.VERSION,
                order_by=v1.OrderBy.DESC,
            )
            found = self._session.call(lambda stub: stub.get_model_versions(req)).model_versions
            return ModelVersion._from_proto(found[0], self._session) if found else None
        one = v1.GetModelVersionRequest(model_name=self._ref(), model_version_num=version)
        resp = self._session.call(lambda stub: stub.get_model_version(one))
        return ModelVersion._from_proto(_present(resp), self._session)

    def get_versions(self, order_by: OrderBy = OrderBy.DESC) -> list[ModelVersion]:
        """Deprecated: ``list_versions``."""
        warnings.warn(
            "Model.get_versions() has been deprecated and will be removed in a future version."
            "Please call Model.list_versions() instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.list_versions(order_by=order_by)

    def list_versions(self, order_by: OrderBy = OrderBy.DESC) -> list[ModelVersion]:
        """The model's versions, by number (newest first unless ``order_by`` says ASC)."""
        from determined.api.gen import v1

        order = v1.OrderBy.DESC if _util.descending(order_by) else v1.OrderBy.ASC

        def fetch(offset: int, limit: int) -> Sequence[v1.ModelVersion]:
            req = v1.GetModelVersionsRequest(
                model_name=self._ref(), offset=offset, limit=limit, order_by=order
            )
            return self._session.call(lambda stub: stub.get_model_versions(req)).model_versions

        return [ModelVersion._from_proto(v, self._session) for v in paged(fetch)]

    def register_version(self, checkpoint_uuid: str) -> ModelVersion:
        """Register the checkpoint (which must have completed) as the model's next version.

        Raises:
            errors.NotFound: there is no such checkpoint.
        """
        from determined.api.gen import v1

        req = v1.PostModelVersionRequest(model_name=self._ref(), checkpoint_uuid=checkpoint_uuid)
        resp = self._session.call(lambda stub: stub.post_model_version(req))
        return ModelVersion._from_proto(_present(resp), self._session)

    def _patch(self, patch: v1.PatchModel) -> None:
        from determined.api.gen import v1

        req = v1.PatchModelRequest(model_name=self._ref(), model=patch)
        resp = self._session.call(lambda stub: stub.patch_model(req))
        if resp.model is None:
            raise errors.DetError("the master's answer carries no model")
        self._hydrate(resp.model)

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Add ``metadata`` (a JSON-serializable dict) to the model's, replacing the keys it
        has already."""
        from determined.api.gen import v1

        if not isinstance(metadata, dict):
            raise ValueError(f"add_metadata() requires a dict as input but got: {metadata}")
        updated = {**(self.metadata or {}), **metadata}
        self._patch(v1.PatchModel(metadata=structs.from_dict(updated)))

    def remove_metadata(self, keys: list[str]) -> None:
        """Remove these top-level keys from the model's metadata."""
        from determined.api.gen import v1

        if not isinstance(keys, Iterable) or not all(isinstance(k, str) for k in keys):
            raise ValueError(
                f"remove_metadata() requires a list of strings as input but got: {keys}"
            )
        updated = {k: v for k, v in (self.metadata or {}).items() if k not in keys}
        self._patch(v1.PatchModel(metadata=structs.from_dict(updated)))

    def move_to_workspace(self, workspace_name: str) -> None:
        """Move the model to the workspace named ``workspace_name``."""
        from determined.api.gen import v1

        self._patch(v1.PatchModel(workspace_name=workspace_name))

    def set_labels(self, labels: list[str]) -> None:
        """Replace the model's labels."""
        from determined.api.gen import v1

        if not isinstance(labels, Iterable) or isinstance(labels, str):
            raise ValueError(f"set_labels() requires a list of strings as input but got: {labels}")
        self._patch(v1.PatchModel(labels=structs.from_list(list(labels))))

    def add_label(self, label: str) -> None:
        """Add one label to the model's (as the master holds them now)."""
        self.reload()
        current = list(self.labels or [])
        if label not in current:
            self.set_labels([*current, label])

    def remove_label(self, label: str) -> None:
        """Remove one label from the model's (as the master holds them now)."""
        self.reload()
        self.set_labels([x for x in self.labels or [] if x != label])

    def set_description(self, description: str) -> None:
        from determined.api.gen import v1

        self._patch(v1.PatchModel(description=description))

    def archive(self) -> None:
        """Archive the model: it takes no new versions or changes."""
        from determined.api.gen import v1

        req = v1.ArchiveModelRequest(model_name=self._ref())
        self._session.call(lambda stub: stub.archive_model(req))
        self.archived = True

    def unarchive(self) -> None:
        """Unarchive the model."""
        from determined.api.gen import v1

        req = v1.UnarchiveModelRequest(model_name=self._ref())
        self._session.call(lambda stub: stub.unarchive_model(req))
        self.archived = False

    def delete(self) -> None:
        """Delete the model and its versions."""
        from determined.api.gen import v1

        req = v1.DeleteModelRequest(model_name=self._ref())
        self._session.call(lambda stub: stub.delete_model(req))


class ModelMethods:
    """``Determined``'s model registry methods (the class mixes them in)."""

    _session: MasterSession

    def create_model(
        self,
        name: str,
        description: str | None = "",
        metadata: dict[str, Any] | None = None,
        labels: list[str] | None = None,
        workspace_name: str | None = None,
    ) -> Model:
        """Add a model named ``name`` (unique in the cluster) to the registry, in the
        workspace named ``workspace_name`` (default: Uncategorized).

        Raises:
            errors.AlreadyExists: a model of that name exists.
        """
        from determined.api.gen import v1

        req = v1.PostModelRequest(
            name=name,
            description=description or "",
            metadata=structs.from_dict(metadata),
            labels=list(labels or []),
            workspace_name=workspace_name,
        )
        resp = self._session.call(lambda stub: stub.post_model(req))
        if resp.model is None:
            raise errors.DetError("the master's answer carries no model")
        return Model._from_proto(resp.model, self._session)

    def get_model(self, identifier: str | int) -> Model:
        """The model with this name, or this id (an int).

        Raises:
            errors.NotFound: there is none.
        """
        from determined.api.gen import v1

        req = v1.GetModelRequest(model_name=str(identifier))
        resp = self._session.call(lambda stub: stub.get_model(req))
        if resp.model is None:
            raise errors.NotFound(f"model {identifier!r} not found")
        return Model._from_proto(resp.model, self._session)

    def get_model_by_id(self, model_id: int) -> Model:
        """Deprecated: ``get_model(model_id)``."""
        warnings.warn(
            "Determined.get_model_by_id() has been deprecated and will be removed in a future "
            "version.\nPlease call Determined.get_model() with either a string-type name or an "
            "integer-type model ID.",
            FutureWarning,
            stacklevel=2,
        )
        return self.get_model(model_id)

    def get_models(
        self,
        sort_by: ModelSortBy = ModelSortBy.NAME,
        order_by: Any = OrderBy.ASCENDING,
        name: str | None = None,
        description: str | None = None,
        model_id: int | None = None,
        workspace_names: list[str] | None = None,
        workspace_ids: list[int] | None = None,
    ) -> list[Model]:
        """Deprecated: ``list_models``."""
        warnings.warn(
            "Determined.get_models() has been deprecated and will be removed in a future "
            "version.Please call Determined.list_models() instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.list_models(
            sort_by, order_by, name, description, model_id, workspace_names, workspace_ids
        )

    def list_models(
        self,
        sort_by: ModelSortBy = ModelSortBy.NAME,
        order_by: Any = OrderBy.ASCENDING,
        name: str | None = None,
        description: str | None = None,
        model_id: int | None = None,
        workspace_names: list[str] | None = None,
        workspace_ids: list[int] | None = None,
    ) -> list[Model]:
        """Every model matching the filters given (a name or description containing these,
        this id, in these workspaces), sorted by ``sort_by`` in ``order_by`` order."""
        from determined.api.gen import v1

        def fetch(offset: int, limit: int) -> Sequence[v1.Model]:
            req = v1.GetModelsRequest(
                sort_by=v1.GetModelsRequestSortBy[sort_by.name],
                order_by=v1.OrderBy.DESC if _util.descending(order_by) else v1.OrderBy.ASC,
                name=name or "",
                description=description or "",
                id=model_id or 0,
                workspace_names=list(workspace_names or []),
                workspace_ids=list(workspace_ids or []),
                offset=offset,
                limit=limit,
            )
            return self._session.call(lambda stub: stub.get_models(req)).models

        return [Model._from_proto(m, self._session) for m in paged(fetch)]

    def get_model_labels(self) -> list[str]:
        """Every label models carry, most used first."""
        from determined.api.gen import v1

        resp = self._session.call(lambda stub: stub.get_model_labels(v1.GetModelLabelsRequest()))
        return list(resp.labels)
