"""The task container's image, environment variables, registry login and ports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from determined.common.expconf._reader import Problems, Section, as_int, as_str, describe

DeviceType = Literal["cpu", "cuda", "rocm"]


@dataclass(frozen=True)
class EnvironmentImage:
    """One image per kind of slot; ``None`` leaves the choice to the master's default."""

    cpu: str | None = None
    cuda: str | None = None
    rocm: str | None = None

    def for_device(self, device: DeviceType) -> str | None:
        return {"cpu": self.cpu, "cuda": self.cuda, "rocm": self.rocm}[device]

    def to_dict(self) -> dict[str, Any]:
        return {"cpu": self.cpu, "cuda": self.cuda, "rocm": self.rocm}


@dataclass(frozen=True)
class EnvironmentVariables:
    """``NAME=VALUE`` entries per kind of slot, in the order given."""

    cpu: tuple[str, ...] = ()
    cuda: tuple[str, ...] = ()
    rocm: tuple[str, ...] = ()

    def for_device(self, device: DeviceType) -> tuple[str, ...]:
        return {"cpu": self.cpu, "cuda": self.cuda, "rocm": self.rocm}[device]

    def to_dict(self) -> dict[str, Any]:
        return {"cpu": list(self.cpu), "cuda": list(self.cuda), "rocm": list(self.rocm)}


@dataclass(frozen=True, kw_only=True)
class RegistryAuth:
    """Docker's ``AuthConfig`` for pulling from a private registry."""

    username: str | None = None
    password: str | None = None
    auth: str | None = None
    email: str | None = None
    serveraddress: str | None = None
    identitytoken: str | None = None
    registrytoken: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "username": self.username,
            "password": self.password,
            "auth": self.auth,
            "email": self.email,
            "serveraddress": self.serveraddress,
            "identitytoken": self.identitytoken,
            "registrytoken": self.registrytoken,
        }


@dataclass(frozen=True, kw_only=True)
class ProxyPort:
    """A port inside the task that the master proxies to users."""

    proxy_port: int
    proxy_tcp: bool = False
    unauthenticated: bool = False
    default_service_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "proxy_port": self.proxy_port,
            "proxy_tcp": self.proxy_tcp,
            "unauthenticated": self.unauthenticated,
            "default_service_id": self.default_service_id,
        }


@dataclass(frozen=True, kw_only=True)
class EnvironmentConfig:
    image: EnvironmentImage = field(default_factory=EnvironmentImage)
    environment_variables: EnvironmentVariables = field(default_factory=EnvironmentVariables)
    force_pull_image: bool = False
    registry_auth: RegistryAuth | None = None
    add_capabilities: tuple[str, ...] = ()
    drop_capabilities: tuple[str, ...] = ()
    ports: dict[str, int] = field(default_factory=dict)
    proxy_ports: tuple[ProxyPort, ...] = ()
    pod_spec: Any = None
    # Determined's per-task Slurm and PBS options: kept for its configs, unused by pydet.
    slurm: tuple[str, ...] = ()
    pbs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image.to_dict(),
            "environment_variables": self.environment_variables.to_dict(),
            "force_pull_image": self.force_pull_image,
            "registry_auth": None if self.registry_auth is None else self.registry_auth.to_dict(),
            "add_capabilities": list(self.add_capabilities),
            "drop_capabilities": list(self.drop_capabilities),
            "ports": dict(self.ports),
            "proxy_ports": [p.to_dict() for p in self.proxy_ports],
            "pod_spec": self.pod_spec,
            "slurm": list(self.slurm),
            "pbs": list(self.pbs),
        }


def _image(sec: Section) -> EnvironmentImage:
    value = sec.raw("image")
    if value is None:
        return EnvironmentImage()
    if isinstance(value, str):
        name = as_str(sec.problems, sec.at("image"), value, non_empty=True)
        return EnvironmentImage(name, name, name)
    if not isinstance(value, Mapping):
        sec.problems.add(
            sec.at("image"),
            f"expected a string or a mapping of cpu, cuda, rocm, got {describe(value)}",
        )
        return EnvironmentImage()
    images = sec.child("image")
    cpu = images.string("cpu", None, non_empty=True)
    cuda = images.string("cuda", None, non_empty=True)
    gpu = images.string("gpu", None, non_empty=True)  # Determined's older name for cuda.
    rocm = images.string("rocm", None, non_empty=True)
    images.finish()
    return EnvironmentImage(cpu, cuda if cuda is not None else gpu, rocm)


def _env_var(problems: Problems, path: str, value: Any) -> str | None:
    text = as_str(problems, path, value)
    if text is not None and text.find("=") < 1:
        problems.add(path, f"expected 'NAME=VALUE', got {text!r}")
        return None
    return text


def _environment_variables(sec: Section) -> EnvironmentVariables:
    def read(section: Section, key: str) -> tuple[str, ...]:
        return section.list_of(key, lambda p, v: _env_var(sec.problems, p, v)) or ()

    value = sec.raw("environment_variables")
    if value is None:
        return EnvironmentVariables()
    if not isinstance(value, Mapping):
        same = read(sec, "environment_variables")
        return EnvironmentVariables(same, same, same)
    per_device = sec.child("environment_variables")
    cpu = read(per_device, "cpu")
    cuda = read(per_device, "cuda")
    gpu = read(per_device, "gpu")
    rocm = read(per_device, "rocm")
    per_device.finish()
    return EnvironmentVariables(cpu, cuda or gpu, rocm)


def _registry_auth(sec: Section) -> RegistryAuth | None:
    if sec.raw("registry_auth") is None:
        return None
    auth = sec.child("registry_auth")
    config = RegistryAuth(
        username=auth.string("username", None),
        password=auth.string("password", None),
        auth=auth.string("auth", None),
        email=auth.string("email", None),
        serveraddress=auth.string("serveraddress", None),
        identitytoken=auth.string("identitytoken", None),
        registrytoken=auth.string("registrytoken", None),
    )
    auth.finish()
    return config


def _ports(sec: Section) -> dict[str, int]:
    ports = sec.child("ports")
    out: dict[str, int] = {}
    for name in ports.keys():
        port = ports.integer(name, None, minimum=1, maximum=65535)
        if port is not None:
            out[name] = port
    return out


def _proxy_port(problems: Problems, path: str, value: Any) -> ProxyPort | None:
    sec = Section(problems, path, value)
    port = sec.need("proxy_port", lambda p, v: as_int(problems, p, v, minimum=1, maximum=65535))
    proxy_tcp = sec.boolean("proxy_tcp", False)
    unauthenticated = sec.boolean("unauthenticated", False)
    default_service_id = sec.string("default_service_id", None)
    sec.finish()
    if port is None:
        return None
    return ProxyPort(
        proxy_port=port,
        proxy_tcp=proxy_tcp,
        unauthenticated=unauthenticated,
        default_service_id=default_service_id,
    )


# The name of the container that runs the task in Determined's pod specs; the task's own
# settings come from the experiment config, so a pod_spec may only add containers beside it.
_TASK_CONTAINER = "determined-container"


def _pod_spec(sec: Section) -> Any:
    spec = sec.json("pod_spec")
    containers = spec.get("spec", {}).get("containers") if isinstance(spec, dict) else None
    if isinstance(containers, list):
        for i, container in enumerate(containers):
            if isinstance(container, dict) and container.get("name") == _TASK_CONTAINER:
                sec.problems.add(
                    f"{sec.at('pod_spec')}.spec.containers[{i}]",
                    f"the {_TASK_CONTAINER} container is not configurable through pod_spec; "
                    "set its image, resources and variables in the experiment config",
                )
    return spec


def parse_environment(sec: Section) -> EnvironmentConfig:
    config = EnvironmentConfig(
        image=_image(sec),
        environment_variables=_environment_variables(sec),
        force_pull_image=sec.boolean("force_pull_image", False),
        registry_auth=_registry_auth(sec),
        add_capabilities=sec.strings("add_capabilities"),
        drop_capabilities=sec.strings("drop_capabilities"),
        ports=_ports(sec),
        proxy_ports=sec.list_of("proxy_ports", lambda p, v: _proxy_port(sec.problems, p, v)) or (),
        pod_spec=_pod_spec(sec),
        slurm=sec.strings("slurm"),
        pbs=sec.strings("pbs"),
    )
    sec.finish()
    return config
