"""Secrets in experiment configs (storage keys, registry passwords) are never shown to
callers: not in the config, not in the config as written, not in a checkpoint's storage,
not in a validation error. Configs are parsed by the real validator and PyYAML."""

from __future__ import annotations

import json

import pytest
import yaml

from determined.common import errors, expconf
from pydet.master.auth import redaction

SECRETS = ("AKIA-ACCESS-KEY", "s3-secret-key-value", "registry-password-value")

CONFIG = f"""\
# my experiment
name: secretive
entrypoint: python3 train.py
searcher: {{name: single, metric: loss, max_length: 1}}
checkpoint_storage:
  type: s3
  bucket: my-bucket   # where checkpoints go
  access_key: {SECRETS[0]}
  secret_key: "{SECRETS[1]}"
environment:
  registry_auth:
    username: robot
    password: '{SECRETS[2]}'
    serveraddress: registry.example.com
"""


def expanded() -> str:
    """The config as the master stores it: validated, with every default filled in."""
    cfg = expconf.parse_experiment_config(expconf.load_yaml(CONFIG), {})
    return json.dumps(cfg.to_dict())


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def test_the_expanded_config_shows_no_secret_and_everything_else() -> None:
    stored = expanded()
    assert all(secret in stored for secret in SECRETS)  # the task needs them
    shown = redaction.redacted_json(stored)
    assert_no_secret(shown)
    cfg = json.loads(shown)
    storage = cfg["checkpoint_storage"]
    assert storage["access_key"] == storage["secret_key"] == redaction.REDACTED
    assert storage["bucket"] == "my-bucket"
    auth = cfg["environment"]["registry_auth"]
    assert auth["password"] == redaction.REDACTED
    assert (auth["username"], auth["serveraddress"]) == ("robot", "registry.example.com")
    # Empty fields stay empty: nothing suggests a secret that is not there.
    assert auth["identitytoken"] is None
    # Apart from the secrets, the same config.
    for spot in (storage, auth):
        for key, value in spot.items():
            if value == redaction.REDACTED:
                spot[key] = None
    original = json.loads(stored)
    original["checkpoint_storage"].update(access_key=None, secret_key=None)
    original["environment"]["registry_auth"]["password"] = None
    assert cfg == original


def test_a_config_without_secrets_is_returned_as_it_was() -> None:
    text = json.dumps({"checkpoint_storage": {"type": "shared_fs", "host_path": "/x"}})
    assert redaction.redacted_json(text) == text
    plain = "entrypoint: python3 train.py  # a comment\n"
    assert redaction.redacted_yaml(plain) is plain


def test_the_config_as_written_keeps_its_comments_and_loses_its_secrets() -> None:
    shown = redaction.redacted_yaml(CONFIG)
    assert_no_secret(shown)
    assert "# my experiment" in shown and "# where checkpoints go" in shown
    cfg = yaml.safe_load(shown)
    assert cfg["checkpoint_storage"]["access_key"] == redaction.REDACTED
    assert cfg["checkpoint_storage"]["secret_key"] == redaction.REDACTED
    assert cfg["environment"]["registry_auth"]["password"] == redaction.REDACTED
    assert cfg["checkpoint_storage"]["bucket"] == "my-bucket"


def test_a_secret_written_twice_is_still_hidden_everywhere_it_is_a_secret() -> None:
    # The same text as a secret and as a name: no text edit can tell them apart safely.
    text = "checkpoint_storage: {type: s3, bucket: same-value, secret_key: same-value}\n"
    shown = redaction.redacted_yaml(text)
    cfg = yaml.safe_load(shown)
    assert cfg["checkpoint_storage"]["secret_key"] == redaction.REDACTED
    assert cfg["checkpoint_storage"]["bucket"] == "same-value"


@pytest.mark.parametrize(
    "storage",
    [
        {"type": "s3", "bucket": "b", "access_key": SECRETS[0], "secret_key": SECRETS[1]},
        {"type": "azure", "container": "c", "connection_string": SECRETS[1]},
        {"type": "azure", "container": "c", "account_url": "u", "credential": SECRETS[1]},
    ],
)
def test_a_checkpoints_storage_shows_no_secret(storage: dict[str, str]) -> None:
    shown = json.loads(redaction.redacted_json(json.dumps(storage), storage=True))
    assert_no_secret(json.dumps(shown))
    assert shown["type"] == storage["type"]
    assert redaction.REDACTED in shown.values()


def test_a_validation_error_does_not_quote_a_secret() -> None:
    # Passwords that YAML reads as numbers are refused without quoting them, and the
    # master scrubs any error about a config of its secrets besides.
    text = CONFIG.replace(f"'{SECRETS[2]}'", "98765432").replace(f'"{SECRETS[1]}"', "12345678")
    with pytest.raises(expconf.InvalidConfig) as refused:
        expconf.parse_experiment_config(expconf.load_yaml(text), {})
    for message in (refused.value.message, redaction.scrubbed(refused.value.message, text)):
        assert "98765432" not in message and "12345678" not in message
        assert "environment.registry_auth.password: expected a string" in message
    quoted = "checkpoint_storage.secret_key: got 12345678 (98765432)"
    assert "12345678" not in redaction.scrubbed(quoted, text)


def test_a_fork_of_a_shown_config_gets_the_parents_secrets_back() -> None:
    stored = expanded()
    fork = redaction.redacted_yaml(CONFIG).replace("name: secretive", "name: forked")
    restored = yaml.safe_load(redaction.restore_secrets(fork, stored))
    assert restored["name"] == "forked"
    assert restored["checkpoint_storage"]["access_key"] == SECRETS[0]
    assert restored["checkpoint_storage"]["secret_key"] == SECRETS[1]
    assert restored["environment"]["registry_auth"]["password"] == SECRETS[2]
    # A fork that sets its own secrets keeps them; one with none is left as it is.
    own = CONFIG.replace(SECRETS[1], "a-new-secret")
    assert redaction.restore_secrets(own, stored) is own


def test_the_config_parser_never_repeats_a_secret_it_refuses() -> None:
    # The CLI validates before it sends anything: its own errors must not quote secrets.
    cfg = {
        "name": "x",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "m", "max_length": 1},
        "checkpoint_storage": {"type": "s3", "bucket": "b", "secret_key": 87654321},
    }
    with pytest.raises(errors.InvalidArgument) as refused:
        expconf.parse_experiment_config(cfg)
    assert "checkpoint_storage.secret_key: expected a string" in refused.value.message
    assert "87654321" not in refused.value.message
