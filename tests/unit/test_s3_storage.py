"""The S3 checkpoint storage without a server: where objects go, and what it shows."""

from __future__ import annotations

import pytest

from determined.common import s3
from determined.core import _checkpoint, _storage
from pydet.master.auth import redaction

CONFIG = {
    "type": "s3",
    "bucket": "ckpts",
    "prefix": "/team/runs/",
    "endpoint_url": "http://127.0.0.1:9000",
    "access_key": "AKIAEXAMPLE",
    "secret_key": "very-secret",
    "save_trial_best": 1,
}


def test_objects_live_at_bucket_prefix_uuid_path() -> None:
    storage = s3.S3Storage(CONFIG)
    assert storage.where == "s3://ckpts/team/runs"
    assert storage.location("u-1") == "s3://ckpts/team/runs/u-1"
    assert storage._key("u-1", "sub/model.pt") == "team/runs/u-1/sub/model.pt"
    no_prefix = s3.S3Storage({**CONFIG, "prefix": None})
    assert no_prefix._key("u-1", "m.pt") == "u-1/m.pt"
    for bad in ("", "..", "a/b"):
        with pytest.raises(ValueError, match="not a checkpoint id"):
            storage._key(bad, "m.pt")


def test_a_url_or_a_config_names_an_s3_storage() -> None:
    from_url = _storage.from_config("s3://ckpts/team/runs", what="t")
    assert isinstance(from_url, s3.S3Storage) and from_url.where == "s3://ckpts/team/runs"
    with pytest.raises(ValueError, match="needs bucket"):
        _storage.from_config({"type": "s3", "prefix": "x"}, what="t")
    with pytest.raises(ValueError, match=r"t\.endpoint_url: expected a string"):
        _storage.from_config({"type": "s3", "bucket": "b", "endpoint_url": 9000}, what="t")


def test_the_secret_is_never_shown() -> None:
    storage = s3.S3Storage(CONFIG)
    assert "very-secret" not in repr(storage)
    assert "very-secret" not in storage.where + storage.location("u")


def test_a_storage_shown_by_the_master_is_the_same_place_without_its_credentials() -> None:
    assert s3.SHOWN_SECRET == redaction.REDACTED
    storage = s3.S3Storage(CONFIG)
    shown = redaction.redacted({"checkpoint_storage": CONFIG})["checkpoint_storage"]
    assert _checkpoint.same_place(storage, shown)
    assert _checkpoint.same_place(storage, {**shown, "prefix": "team/runs"})
    assert not _checkpoint.same_place(storage, {**shown, "bucket": "other"})
    assert not _checkpoint.same_place(storage, {**shown, "endpoint_url": None})
    # Elsewhere, hidden credentials are not used as credentials: boto3's chain is.
    assert s3.S3Storage({**shown, "bucket": "other"})._keys == {}
