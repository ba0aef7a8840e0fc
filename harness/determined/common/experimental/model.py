"""The model registry's SDK names, as far as pydet has them.

``from determined.experimental import model`` works, and so do ``ModelSortBy`` and
``ModelOrderBy``; the registry itself (``Model``, ``ModelVersion``,
``Determined.create_model``, ...) is not part of pydet yet, so those names are absent
rather than present and failing.
"""

from __future__ import annotations

import enum

from determined.common.experimental._util import DeprecatedEnum


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
