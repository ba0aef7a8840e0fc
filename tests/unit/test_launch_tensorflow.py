"""determined.launch.tensorflow: its command line and the TF_CONFIG it gives each container."""

from __future__ import annotations

import pytest

from determined.launch import tensorflow


def test_every_container_is_a_worker_and_knows_its_index() -> None:
    config = tensorflow.tf_config(["10.0.0.1", "10.0.0.2"], 1, 29400)
    assert config == {
        "cluster": {"worker": ["10.0.0.1:29400", "10.0.0.2:29400"]},
        "task": {"type": "worker", "index": 1},
    }


def test_containers_on_one_address_get_ports_of_their_own() -> None:
    config = tensorflow.tf_config(["127.0.0.1", "127.0.0.1"], 0, 5000)
    assert config["cluster"] == {"worker": ["127.0.0.1:5000", "127.0.0.1:5001"]}


def test_the_script_follows_the_options_or_a_double_dash() -> None:
    assert tensorflow.parse(["--port", "1234", "--", "python3", "train.py", "--x", "1"]) == (
        1234,
        ["python3", "train.py", "--x", "1"],
    )
    port, script = tensorflow.parse(["python3", "train.py"])
    assert script == ["python3", "train.py"] and port > 0


def test_no_script_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        tensorflow.parse(["--"])
    assert exit_info.value.code == 2
    assert "empty script is not allowed" in capsys.readouterr().err
