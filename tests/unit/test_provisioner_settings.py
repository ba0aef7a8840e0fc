"""An elastic pool's provider settings: Determined's names and defaults, and every bad value
refused naming its field (master/provisioner/settings.py, through the master config)."""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

import pytest
import yaml

from determined.common import errors
from pydet.master import config
from pydet.master.provisioner import settings

AWS = {"type": "aws", "region": "us-east-1", "image_id": "ami-0123456789abcdef0"}
COMMAND = {
    "type": "command",
    "launch": ["/opt/launch"],
    "terminate": ["/opt/end"],
    "list": ["/opt/ls"],
}


def load(tmp_path: pathlib.Path, pools: list[dict[str, Any]]) -> config.MasterConfig:
    path = tmp_path / "master.yaml"
    path.write_text(yaml.safe_dump({"resource_pools": pools}))
    return config.load(argparse.Namespace(config_file=str(path)))


def refused(tmp_path: pathlib.Path, provider: dict[str, Any]) -> str:
    with pytest.raises(errors.InvalidArgument) as e:
        load(tmp_path, [{"pool_name": "default"}, {"pool_name": "gpu", "provider": provider}])
    return e.value.message


def test_an_aws_pool_takes_determineds_defaults(tmp_path: pathlib.Path) -> None:
    cfg = load(tmp_path, [{"pool_name": "gpu", "provider": AWS}])
    p = cfg.resource_pools[0].provider
    assert p is not None and p.aws is not None
    assert (p.min_instances, p.max_instances) == (0, 5)
    assert p.max_idle_agent_period == p.max_agent_starting_period == 20 * 60
    assert p.aws.instance_type == "g4dn.metal" and p.aws.slots == 8 and p.aws.gpus
    assert p.aws.tag_key == "managed_by" and p.aws.root_volume_size == 200
    assert p.slots_per_instance == 8


def test_durations_read_as_determined_writes_them() -> None:
    assert settings.duration("20m", "x") == 1200
    assert settings.duration("1h30m", "x") == 5400
    assert settings.duration("500ms", "x") == 0.5
    assert settings.duration(45, "x") == 45
    with pytest.raises(settings.ProviderConfigError, match="x: expected a duration"):
        settings.duration("soon", "x")


def test_a_cpu_instance_needs_cpu_slots_allowed(tmp_path: pathlib.Path) -> None:
    message = refused(tmp_path, {**AWS, "instance_type": "t3.large"})
    assert "resource_pools[1].provider.cpu_slots_allowed" in message
    cfg = load(
        tmp_path,
        [
            {
                "pool_name": "cpu",
                "provider": {
                    **AWS,
                    "instance_type": "t3.large",
                    "cpu_slots_allowed": True,
                    "instance_slots": 2,
                },
            }
        ],
    )
    p = cfg.resource_pools[0].provider
    assert p is not None and p.aws is not None and (p.aws.slots, p.aws.gpus) == (2, False)


@pytest.mark.parametrize(
    ("provider", "field"),
    [
        ({"type": "gcp"}, "provider.type"),
        ({**AWS, "regoin": "x"}, "provider.regoin: unknown key"),
        ({**AWS, "region": ""}, "provider.region"),
        ({"type": "aws", "region": "us-east-1"}, "provider.image_id"),
        ({**AWS, "max_instances": 0}, "provider.max_instances"),
        ({**AWS, "min_instances": 3, "max_instances": 2}, "provider.max_instances: 2 is less"),
        ({**AWS, "max_idle_agent_period": "0s"}, "provider.max_idle_agent_period"),
        ({**AWS, "launch_error_retries": -1}, "provider.launch_error_retries"),
        ({**AWS, "instance_type": "x9.huge"}, "provider.instance_slots"),
        ({**AWS, "spot_max_price": "cheap"}, "provider.spot_max_price"),
        ({**AWS, "custom_tags": [{"key": "a"}]}, "provider.custom_tags"),
        ({**AWS, "network_interface": {"subnet": "s"}}, "provider.network_interface.subnet"),
        ({**AWS, "master_url": "http://host/path"}, "provider.master_url"),
        ({**COMMAND, "launch": "/opt/launch"}, "provider.launch"),
        ({**COMMAND, "region": "us-east-1"}, "provider.region: unknown key for a command"),
    ],
)
def test_a_bad_provider_setting_is_refused_naming_its_field(
    tmp_path: pathlib.Path, provider: dict[str, Any], field: str
) -> None:
    assert f"resource_pools[1].{field}" in refused(tmp_path, provider)


def test_an_unknown_key_in_any_pool_is_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.InvalidArgument, match=r"resource_pools\[0\].providr: unknown key"):
        load(tmp_path, [{"pool_name": "default", "providr": AWS}])
