"""An elastic pool's ``provider:`` settings, as Determined's master config names them, parsed
and checked once at the master's start; every problem names its field
(``resource_pools[1].provider.max_instances: ...``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PROVIDER_TYPES = ("aws", "command")

# GPUs of the EC2 instance types pydet knows; any other type needs `instance_slots`.
EC2_GPUS = {
    "g4dn.xlarge": 1,
    "g4dn.2xlarge": 1,
    "g4dn.4xlarge": 1,
    "g4dn.8xlarge": 1,
    "g4dn.16xlarge": 1,
    "g4dn.12xlarge": 4,
    "g4dn.metal": 8,
    "g5.xlarge": 1,
    "g5.2xlarge": 1,
    "g5.4xlarge": 1,
    "g5.8xlarge": 1,
    "g5.16xlarge": 1,
    "g5.12xlarge": 4,
    "g5.24xlarge": 4,
    "g5.48xlarge": 8,
    "g6.xlarge": 1,
    "g6.12xlarge": 4,
    "g6.48xlarge": 8,
    "p3.2xlarge": 1,
    "p3.8xlarge": 4,
    "p3.16xlarge": 8,
    "p3dn.24xlarge": 8,
    "p4d.24xlarge": 8,
    "p4de.24xlarge": 8,
    "p5.48xlarge": 8,
}
# CPU-only families: an instance of these has no GPU slot (cpu_slots_allowed gives it CPU ones).
_CPU_FAMILIES = ("t2.", "t3.", "t3a.", "c4.", "c5", "c6", "c7", "m4.", "m5", "m6", "m7", "r5", "r6")


class ProviderConfigError(Exception):
    """A bad provider setting; the message names the field."""


@dataclass(frozen=True)
class AwsSettings:
    region: str
    image_id: str
    instance_type: str = "g4dn.metal"
    # Slots of one instance: its GPUs, or with cpu_slots_allowed its CPU slots.
    slots: int = 8
    gpus: bool = True
    root_volume_size: int = 200
    ssh_key_name: str = ""
    public_ip: bool = True
    subnet_id: str = ""
    security_group_id: str = ""
    iam_instance_profile_arn: str = ""
    tag_key: str = "managed_by"
    tag_value: str = ""  # "": the master's cluster id
    custom_tags: tuple[tuple[str, str], ...] = ()
    instance_name: str = "pydet-agent"
    spot: bool = False
    spot_max_price: str = ""  # "": up to the on-demand price
    cpu_slots_allowed: bool = False


@dataclass(frozen=True)
class CommandSettings:
    """Programs the admin provides, run as argv lists (no shell): ``launch`` starts one
    instance (``launch AGENT_ID`` with the instance's startup script on stdin, printing the
    instance's id), ``terminate ID...`` ends instances, ``list`` prints the instances it
    knows, one JSON object a line."""

    launch: tuple[str, ...]
    terminate: tuple[str, ...]
    list: tuple[str, ...]
    slots: int = 1
    gpus: bool = False
    timeout: float = 60.0


@dataclass(frozen=True)
class ProviderSettings:
    type: str
    min_instances: int = 0
    max_instances: int = 5
    max_idle_agent_period: float = 20 * 60.0
    max_agent_starting_period: float = 20 * 60.0
    # Failed launches back off; after launch_error_retries of them in a row the error is
    # the pool's and launching waits launch_error_timeout (0: the back-off alone).
    launch_error_timeout: float = 0.0
    launch_error_retries: int = 0
    master_url: str = ""  # "": the address the master gives its tasks
    master_cert_name: str = ""
    startup_script: str = ""
    container_startup_script: str = ""
    aws: AwsSettings | None = None
    command: CommandSettings | None = None

    @property
    def slots_per_instance(self) -> int:
        detail = self.aws or self.command
        assert detail is not None
        return max(1, detail.slots)


_COMMON = {
    "type",
    "min_instances",
    "max_instances",
    "max_idle_agent_period",
    "max_agent_starting_period",
    "launch_error_timeout",
    "launch_error_retries",
    "master_url",
    "master_cert_name",
    "startup_script",
    "container_startup_script",
}
_AWS = {
    "region",
    "image_id",
    "instance_type",
    "instance_slots",
    "root_volume_size",
    "ssh_key_name",
    "network_interface",
    "iam_instance_profile_arn",
    "tag_key",
    "tag_value",
    "custom_tags",
    "instance_name",
    "spot",
    "spot_max_price",
    "cpu_slots_allowed",
}
_COMMAND = {"launch", "terminate", "list", "instance_slots", "timeout"}
_NETWORK_INTERFACE = {"public_ip", "subnet_id", "security_group_id"}

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(value: Any, where: str) -> float:
    """Seconds, from a number of seconds or a Go-style duration as Determined writes them
    ("20m", "30s", "1h30m", "500ms")."""
    if isinstance(value, bool):
        raise ProviderConfigError(f"{where}: expected a duration such as 20m or 30s")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and value and _DURATION_PART.sub("", value) == "":
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value.strip()))
    else:
        raise ProviderConfigError(f"{where}: expected a duration such as 20m or 30s, not {value!r}")
    if seconds < 0:
        raise ProviderConfigError(f"{where}: expected a duration of 0 or more")
    return seconds


def parse(raw: Any, where: str) -> ProviderSettings:
    """``resource_pools[i].provider`` of the master config; ``where`` is that path."""
    if not isinstance(raw, dict):
        raise ProviderConfigError(f"{where}: expected a mapping with a type (aws or command)")
    kind = raw.get("type")
    if kind not in PROVIDER_TYPES:
        raise ProviderConfigError(
            f"{where}.type: expected one of {', '.join(PROVIDER_TYPES)}, not {kind!r}"
        )
    known = _COMMON | (_AWS if kind == "aws" else _COMMAND)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ProviderConfigError(
            f"{where}.{unknown[0]}: unknown key for a {kind} provider "
            f"(known: {', '.join(sorted(known))})"
        )
    minimum = _count(raw, "min_instances", 0, where, least=0)
    maximum = _count(raw, "max_instances", 5, where, least=1)
    if maximum < minimum:
        raise ProviderConfigError(
            f"{where}.max_instances: {maximum} is less than min_instances ({minimum})"
        )
    periods = {}
    for key, default in (("max_idle_agent_period", "20m"), ("max_agent_starting_period", "20m")):
        periods[key] = duration(raw.get(key, default), f"{where}.{key}")
        if periods[key] <= 0:
            raise ProviderConfigError(f"{where}.{key}: must be more than 0")
    master_url = _string(raw, "master_url", where)
    if master_url and not re.fullmatch(r"(https?://)?[^/:\s]+(:\d+)?", master_url):
        raise ProviderConfigError(
            f"{where}.master_url: expected scheme://host:port (http or https), not {master_url!r}"
        )
    return ProviderSettings(
        type=kind,
        min_instances=minimum,
        max_instances=maximum,
        max_idle_agent_period=periods["max_idle_agent_period"],
        max_agent_starting_period=periods["max_agent_starting_period"],
        launch_error_timeout=duration(
            raw.get("launch_error_timeout", 0), f"{where}.launch_error_timeout"
        ),
        launch_error_retries=_count(raw, "launch_error_retries", 0, where, least=0),
        master_url=master_url,
        master_cert_name=_string(raw, "master_cert_name", where),
        startup_script=_string(raw, "startup_script", where),
        container_startup_script=_string(raw, "container_startup_script", where),
        aws=_aws(raw, where) if kind == "aws" else None,
        command=_command(raw, where) if kind == "command" else None,
    )


def _aws(raw: dict[str, Any], where: str) -> AwsSettings:
    region = _string(raw, "region", where)
    if not region:
        raise ProviderConfigError(f"{where}.region: the AWS region to launch in is required")
    image_id = _string(raw, "image_id", where)
    if not image_id:
        raise ProviderConfigError(
            f"{where}.image_id: the AMI to launch is required (an image with pydet installed, "
            "so that det-agent is on its PATH)"
        )
    instance_type = _string(raw, "instance_type", where) or "g4dn.metal"
    cpu_ok = _flag(raw, "cpu_slots_allowed", False, where)
    slots_raw = raw.get("instance_slots")
    gpus = EC2_GPUS.get(instance_type)
    if slots_raw is not None:
        if isinstance(slots_raw, bool) or not isinstance(slots_raw, int) or slots_raw < 0:
            raise ProviderConfigError(f"{where}.instance_slots: expected a whole number >= 0")
    if gpus is None and slots_raw is None and not instance_type.startswith(_CPU_FAMILIES):
        raise ProviderConfigError(
            f"{where}.instance_slots: pydet does not know how many GPUs a {instance_type} has; "
            "set instance_slots"
        )
    slots = slots_raw if slots_raw is not None else (gpus or 0)
    on_gpus = gpus is not None and gpus > 0 and slots_raw != 0
    if not on_gpus:
        if not cpu_ok:
            raise ProviderConfigError(
                f"{where}.cpu_slots_allowed: a {instance_type} has no GPU; set "
                "cpu_slots_allowed: true to use its CPUs as slots"
            )
        slots = slots or 1
    size = _count(raw, "root_volume_size", 200, where, least=8)
    nic = raw.get("network_interface") or {}
    if not isinstance(nic, dict):
        raise ProviderConfigError(f"{where}.network_interface: expected a mapping")
    unknown = sorted(set(nic) - _NETWORK_INTERFACE)
    if unknown:
        raise ProviderConfigError(
            f"{where}.network_interface.{unknown[0]}: unknown key "
            f"(known: {', '.join(sorted(_NETWORK_INTERFACE))})"
        )
    nic_where = f"{where}.network_interface"
    tags = raw.get("custom_tags") or []
    if not isinstance(tags, list) or not all(
        isinstance(t, dict)
        and set(t) == {"key", "value"}
        and all(isinstance(v, str) for v in t.values())
        for t in tags
    ):
        raise ProviderConfigError(
            f"{where}.custom_tags: expected a list of {{key: ..., value: ...}} string pairs"
        )
    price = raw.get("spot_max_price", "")
    if price not in ("", None) and not re.fullmatch(r"\d+(\.\d+)?", str(price)):
        raise ProviderConfigError(
            f"{where}.spot_max_price: expected a price in dollars such as 0.5, not {price!r}"
        )
    tag_key = _string(raw, "tag_key", where) or "managed_by"
    return AwsSettings(
        region=region,
        image_id=image_id,
        instance_type=instance_type,
        slots=slots,
        gpus=on_gpus,
        root_volume_size=size,
        ssh_key_name=_string(raw, "ssh_key_name", where),
        public_ip=_flag(nic, "public_ip", True, nic_where),
        subnet_id=_string(nic, "subnet_id", nic_where),
        security_group_id=_string(nic, "security_group_id", nic_where),
        iam_instance_profile_arn=_string(raw, "iam_instance_profile_arn", where),
        tag_key=tag_key,
        tag_value=_string(raw, "tag_value", where),
        custom_tags=tuple((t["key"], t["value"]) for t in tags),
        instance_name=_string(raw, "instance_name", where) or "pydet-agent",
        spot=_flag(raw, "spot", False, where),
        spot_max_price="" if price is None else str(price),
        cpu_slots_allowed=cpu_ok,
    )


def _command(raw: dict[str, Any], where: str) -> CommandSettings:
    argvs = {}
    for key in ("launch", "terminate", "list"):
        value = raw.get(key)
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(a, str) and a for a in value)
        ):
            raise ProviderConfigError(
                f"{where}.{key}: expected a program and its arguments as a list of strings"
            )
        argvs[key] = tuple(value)
    return CommandSettings(
        launch=argvs["launch"],
        terminate=argvs["terminate"],
        list=argvs["list"],
        slots=_count(raw, "instance_slots", 1, where, least=1),
        timeout=duration(raw.get("timeout", 60), f"{where}.timeout") or 60.0,
    )


def _count(raw: dict[str, Any], key: str, default: int, where: str, *, least: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ProviderConfigError(
            f"{where}.{key}: expected a whole number >= {least}, not {value!r}"
        )
    return value


def _is_tag(tag: Any) -> bool:
    return (
        isinstance(tag, dict)
        and set(tag) == {"key", "value"}
        and all(isinstance(v, str) for v in tag.values())
    )


def _string(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ProviderConfigError(f"{where}.{key}: expected a string")
    return value


def _flag(raw: dict[str, Any], key: str, default: bool, where: str) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ProviderConfigError(f"{where}.{key}: expected true or false")
    return value
