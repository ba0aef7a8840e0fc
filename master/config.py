"""The master's configuration: a YAML file, then flags on top. Parsed once, at the edge."""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any

import yaml

from determined.common import errors
from pydet.master.auth import redaction
from pydet.master.auth.access_tokens import MAX_ALLOWED_DAYS, Lifespans
from pydet.master.provisioner import settings as provider_settings
from pydet.master.provisioner.settings import ProviderSettings
from pydet.master.slurm.sbatch import (
    SbatchError,
    SlurmPoolConfig,
    check_sbatch_args,
    parse_time_limit,
)
from pydet.master.store.connection import DbConfig

_KEYS = {
    "host",
    "port",
    "data_dir",
    "checkpoint_storage",
    "resource_pools",
    "default_resource_pool",
    "agent_reconnect_timeout",
    "log_level",
    "advertised_address",
    "security",
    "webui_dir",
    "webhooks",
    "db",
    "retention_policy",
    "task_container_defaults",
}
_DB_KEYS = {"type", "host", "port", "name", "user", "password_file"}
_SECURITY_KEYS = {
    "agent_token_file",
    "session_lifetime",
    "tls",
    "max_connections_per_address",
    "max_connections",
    "first_request_timeout",
    "idle_connection_timeout",
    "token",
}


@dataclass(frozen=True)
class PoolConfig:
    name: str
    description: str = ""
    scheduler: str = "priority"
    fitting_policy: str = "best"
    preemption: bool = False
    # type: slurm pools run each allocation as one Slurm batch job (master/slurm/pool.py).
    slurm: SlurmPoolConfig | None = None
    # Elastic pools: the master launches and terminates the pool's instances
    # (master/provisioner/).
    provider: ProviderSettings | None = None


@dataclass(frozen=True)
class TlsConfig:
    cert: pathlib.Path
    key: pathlib.Path


@dataclass(frozen=True)
class SecurityConfig:
    # Default: <data_dir>/agent-token, generated at first start.
    agent_token_file: pathlib.Path | None = None
    session_lifetime: float = 7 * 24 * 3600.0
    tls: TlsConfig | None = None
    # Connection limits (master/listener.py); max_connections 0: from the open-file limit.
    max_connections_per_address: int = 256
    max_connections: int = 0
    first_request_timeout: float = 10.0
    idle_connection_timeout: float = 300.0
    # Access tokens' lifespans (Determined's security.token), in days.
    token: Lifespans = field(default_factory=Lifespans)


@dataclass(frozen=True)
class MasterConfig:
    host: str = "0.0.0.0"
    port: int = 8080
    data_dir: pathlib.Path = field(
        default_factory=lambda: pathlib.Path("~/.local/share/pydet/master").expanduser()
    )
    checkpoint_storage: dict[str, Any] = field(default_factory=dict)
    resource_pools: tuple[PoolConfig, ...] = (PoolConfig("default"),)
    default_resource_pool: str = "default"
    agent_reconnect_timeout: float = 60.0
    log_level: str = "info"
    advertised_address: str = ""
    security: SecurityConfig = field(default_factory=SecurityConfig)
    # A development build of the WebUI to serve instead of the one in the package.
    webui_dir: pathlib.Path | None = None
    # The key webhook POSTs are signed with (Determined's webhooks.signing_key); when the
    # config has none, one generated at first start is kept in <data_dir>/webhook-signing-key.
    webhook_signing_key: str | None = None
    db: DbConfig = field(default_factory=DbConfig)
    # Days an ended experiment's logs are kept unless its config says (Determined's
    # retention_policy.log_retention_days); None: forever (master/logs/retention.py).
    log_retention_days: int | None = None
    # The working directory of commands, notebooks, shells and generic tasks whose config
    # names none (Determined's task_container_defaults.work_dir; `det deploy local
    # --auto-work-dir`); it is bind-mounted at the same path into Docker tasks.
    task_work_dir: str | None = None

    @property
    def db_path(self) -> pathlib.Path:
        return self.data_dir / "pydet.db"

    @property
    def webhook_signing_key_path(self) -> pathlib.Path:
        return self.data_dir / "webhook-signing-key"

    @property
    def agent_token_path(self) -> pathlib.Path:
        return self.security.agent_token_file or self.data_dir / "agent-token"

    def storage(self) -> dict[str, Any]:
        """The default checkpoint storage: a shared_fs under the data directory."""
        return self.checkpoint_storage or {
            "type": "shared_fs",
            "host_path": str((self.data_dir / "checkpoints").resolve()),
        }

    def task_defaults(self) -> dict[str, Any]:
        """What task_container_defaults fills the configs of tasks that are not trials with."""
        if self.task_work_dir is None:
            return {}
        mount = {"host_path": self.task_work_dir, "container_path": self.task_work_dir}
        return {"work_dir": self.task_work_dir, "bind_mounts": [mount]}

    def address_for_tasks(self) -> str:
        scheme = "https://" if self.security.tls is not None else ""
        if self.advertised_address:
            if "://" in self.advertised_address:
                return self.advertised_address
            return scheme + self.advertised_address
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"{scheme}{host}:{self.port}"


def _fail(msg: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(f"master config: {msg}")


def _pools(raw: Any) -> tuple[PoolConfig, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail("resource_pools: expected a non-empty list of pools")
    pools = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("pool_name"), str):
            raise _fail(f"resource_pools[{i}]: expected a mapping with a pool_name")
        sched = item.get("scheduler") or {}
        kind = sched.get("type", "priority")
        if kind not in ("priority", "fair_share"):
            raise _fail(f"resource_pools[{i}].scheduler.type: expected priority or fair_share")
        pool_type = item.get("type", "agent")
        if pool_type not in ("agent", "slurm"):
            raise _fail(f"resource_pools[{i}].type: expected agent or slurm, not {pool_type!r}")
        if pool_type == "agent":
            unknown = sorted(set(item) - _POOL_KEYS - {"provider"})
            if unknown:
                known = ", ".join(sorted(_POOL_KEYS | {"provider"}))
                raise _fail(f"resource_pools[{i}].{unknown[0]}: unknown key (known: {known})")
        pools.append(
            PoolConfig(
                name=item["pool_name"],
                description=str(item.get("description", "")),
                scheduler=kind,
                fitting_policy=str(sched.get("fitting_policy", "best")),
                preemption=bool(sched.get("preemption", False)),
                slurm=_slurm_pool(item, f"resource_pools[{i}]") if pool_type == "slurm" else None,
                provider=_provider(item.get("provider"), f"resource_pools[{i}].provider"),
            )
        )
    return tuple(pools)


_POOL_KEYS = {"pool_name", "description", "scheduler", "type"}


def _provider(raw: Any, where: str) -> ProviderSettings | None:
    if raw is None:
        return None
    try:
        return provider_settings.parse(raw, where)
    except provider_settings.ProviderConfigError as e:
        raise _fail(str(e)) from None


_SLURM_KEYS = {
    "partition",
    "slots_per_node",
    "gres",
    "sbatch_args",
    "job_storage_root",
    "nodes",
    "time_limit",
}


def _slurm_pool(item: dict[str, Any], where: str) -> SlurmPoolConfig:
    unknown = sorted(set(item) - _POOL_KEYS - _SLURM_KEYS)
    if unknown:
        known = ", ".join(sorted(_POOL_KEYS | _SLURM_KEYS))
        raise _fail(f"{where}.{unknown[0]}: unknown key for a slurm pool (known: {known})")
    for key in ("partition", "gres"):
        value = item.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise _fail(f"{where}.{key}: expected a non-empty string")
    counts: dict[str, int | None] = {}
    for key in ("slots_per_node", "nodes"):
        value = item.get(key, 1 if key == "slots_per_node" else None)
        if value is None:
            counts[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _fail(f"{where}.{key}: expected a whole number >= 1, not {value!r}")
        counts[key] = value
    args = item.get("sbatch_args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _fail(f"{where}.sbatch_args: expected a list of strings")
    try:
        check_sbatch_args(args, f"{where}.sbatch_args")
        limit = item.get("time_limit")
        time_limit = parse_time_limit(limit, f"{where}.time_limit") if limit is not None else None
    except SbatchError as e:
        raise _fail(str(e)) from None
    root = item.get("job_storage_root")
    if not isinstance(root, str) or not os.path.isabs(os.path.expanduser(root)):
        raise _fail(
            f"{where}.job_storage_root: expected the absolute path of a directory that the "
            "master and every Slurm node share"
        )
    return SlurmPoolConfig(
        pool_name=item["pool_name"],
        partition=item.get("partition"),
        slots_per_node=counts["slots_per_node"] or 1,
        nodes=counts["nodes"],
        gres=item.get("gres"),
        sbatch_args=tuple(args),
        job_storage_root=os.path.expanduser(root),
        time_limit=time_limit,
    )


def _path(value: Any, where: str) -> pathlib.Path:
    if not isinstance(value, str) or not value:
        raise _fail(f"{where}: expected a file path")
    return pathlib.Path(os.path.expanduser(value)).resolve()


def _security(raw: Any) -> SecurityConfig:
    if raw is None:
        return SecurityConfig()
    if not isinstance(raw, dict):
        raise _fail("security: expected a mapping")
    unknown = sorted(set(raw) - _SECURITY_KEYS)
    if unknown:
        known = ", ".join(sorted(_SECURITY_KEYS))
        raise _fail(f"security.{unknown[0]}: unknown key (known: {known})")
    token_file = raw.get("agent_token_file")
    lifetime = raw.get("session_lifetime", SecurityConfig().session_lifetime)
    if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or lifetime <= 0:
        raise _fail("security.session_lifetime: expected a positive number of seconds")
    tls = raw.get("tls")
    tls_cfg = None
    if tls is not None:
        if not isinstance(tls, dict) or set(tls) - {"cert", "key"}:
            raise _fail("security.tls: expected a mapping with cert and key")
        tls_cfg = TlsConfig(
            cert=_path(tls.get("cert"), "security.tls.cert"),
            key=_path(tls.get("key"), "security.tls.key"),
        )
    defaults = SecurityConfig()
    limits: dict[str, Any] = {}
    for key in ("max_connections_per_address", "max_connections"):
        value = raw.get(key, getattr(defaults, key))
        least = 0 if key == "max_connections" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise _fail(f"security.{key}: expected an integer >= {least}")
        limits[key] = value
    for key in ("first_request_timeout", "idle_connection_timeout"):
        value = raw.get(key, getattr(defaults, key))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise _fail(f"security.{key}: expected a positive number of seconds")
        limits[key] = float(value)
    return SecurityConfig(
        **limits,
        token=_token_lifespans(raw.get("token")),
        agent_token_file=(
            _path(token_file, "security.agent_token_file") if token_file is not None else None
        ),
        session_lifetime=float(lifetime),
        tls=tls_cfg,
    )


def _token_lifespans(raw: Any) -> Lifespans:
    """``security.token``: ``max_lifespan_days`` and ``default_lifespan_days`` (-1: the
    longest allowed), as Determined's master config has them."""
    if raw is None:
        return Lifespans()
    if not isinstance(raw, dict):
        raise _fail("security.token: expected a mapping")
    known = ("max_lifespan_days", "default_lifespan_days")
    for key in raw:
        if key not in known:
            raise _fail(f"security.token.{key}: unknown key (known: {', '.join(known)})")
    days: dict[str, int] = {}
    for key in known:
        value = raw.get(key, Lifespans().default_days)
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise _fail(f"security.token.{key}: expected a number of days >= 0, or -1")
        if value > MAX_ALLOWED_DAYS:
            raise _fail(f"security.token.{key}: at most {MAX_ALLOWED_DAYS} days")
        days[key] = MAX_ALLOWED_DAYS if value == -1 else value
    if days["default_lifespan_days"] > days["max_lifespan_days"]:
        raise _fail("security.token.default_lifespan_days: longer than max_lifespan_days")
    return Lifespans(default_days=days["default_lifespan_days"], max_days=days["max_lifespan_days"])


def _db(raw: Any) -> DbConfig:
    if raw is None:
        return DbConfig()
    if not isinstance(raw, dict):
        raise _fail("db: expected a mapping")
    unknown = sorted(set(raw) - _DB_KEYS)
    if unknown:
        raise _fail(f"db.{unknown[0]}: unknown key (known: {', '.join(sorted(_DB_KEYS))})")
    kind = raw.get("type", "sqlite")
    if kind not in ("sqlite", "postgres"):
        raise _fail(f"db.type: expected sqlite or postgres, not {kind!r}")
    if kind == "sqlite":
        extra = sorted(set(raw) - {"type"})
        if extra:
            raise _fail(f"db.{extra[0]}: only for db.type postgres")
        return DbConfig()
    defaults = DbConfig()
    strings: dict[str, str] = {}
    for key in ("host", "name", "user"):
        value = raw.get(key, getattr(defaults, key))
        if not isinstance(value, str) or not value:
            raise _fail(f"db.{key}: expected a non-empty string")
        strings[key] = value
    port = raw.get("port", defaults.port)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise _fail("db.port: expected a port number (1-65535)")
    password_file = raw.get("password_file")
    path = None
    if password_file is not None:
        path = _path(password_file, "db.password_file")
        if not path.is_file():
            raise _fail(f"db.password_file: {path} is not a file")
    return DbConfig(type="postgres", port=port, password_file=path, **strings)


def load(args: argparse.Namespace) -> MasterConfig:
    raw: dict[str, Any] = {}
    if args.config_file:
        try:
            loaded = yaml.safe_load(pathlib.Path(args.config_file).read_text())
        except OSError as e:
            raise _fail(f"cannot read {args.config_file}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise _fail(f"{args.config_file} is not valid YAML: {e}") from None
        raw = loaded or {}
        if not isinstance(raw, dict):
            raise _fail(f"{args.config_file} must hold a mapping")
        unknown = sorted(set(raw) - _KEYS)
        if unknown:
            raise _fail(f"{unknown[0]}: unknown key (known: {', '.join(sorted(_KEYS))})")
    for key in ("host", "port", "data_dir", "log_level", "agent_reconnect_timeout", "webui_dir"):
        value = getattr(args, key, None)
        if value is not None:
            raw[key] = value
    if getattr(args, "checkpoint_path", None):
        raw["checkpoint_storage"] = {"type": "shared_fs", "host_path": args.checkpoint_path}
    data_dir = pathlib.Path(os.path.expanduser(str(raw.get("data_dir", MasterConfig().data_dir))))
    pools = (
        _pools(raw["resource_pools"]) if "resource_pools" in raw else MasterConfig().resource_pools
    )
    default_pool = str(raw.get("default_resource_pool", pools[0].name))
    if default_pool not in {p.name for p in pools}:
        raise _fail(f"default_resource_pool: no pool named {default_pool!r}")
    try:
        port = int(raw.get("port", 8080))
        timeout = float(raw.get("agent_reconnect_timeout", 60.0))
    except (TypeError, ValueError) as e:
        raise _fail(str(e)) from None
    storage = raw.get("checkpoint_storage") or {}
    if storage and not isinstance(storage, dict):
        raise _fail("checkpoint_storage: expected a mapping")
    return MasterConfig(
        host=str(raw.get("host", "0.0.0.0")),
        port=port,
        data_dir=data_dir.resolve(),
        checkpoint_storage=dict(storage),
        resource_pools=pools,
        default_resource_pool=default_pool,
        agent_reconnect_timeout=timeout,
        log_level=str(raw.get("log_level", "info")),
        advertised_address=str(raw.get("advertised_address", "")),
        security=_security(raw.get("security")),
        webui_dir=_webui_dir(raw.get("webui_dir")),
        webhook_signing_key=_signing_key(raw.get("webhooks")),
        db=_db(raw.get("db")),
        log_retention_days=_log_retention_days(raw.get("retention_policy")),
        task_work_dir=_task_work_dir(raw.get("task_container_defaults")),
    )


def _task_work_dir(raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"work_dir"}:
        raise _fail("task_container_defaults: expected a mapping with work_dir (pydet's only key)")
    value = raw.get("work_dir")
    if value is None:
        return None
    if not isinstance(value, str) or not os.path.isabs(value):
        raise _fail(f"task_container_defaults.work_dir: expected an absolute path, got {value!r}")
    return value


def _log_retention_days(raw: Any) -> int | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"log_retention_days"}:
        raise _fail("retention_policy: expected a mapping with log_retention_days")
    days = raw.get("log_retention_days")
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or not -1 <= days <= 32767:
        raise _fail(
            "retention_policy.log_retention_days: expected a whole number of days, -1 to 32767"
        )
    return days


def _signing_key(raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"signing_key"}:
        raise _fail("webhooks: expected a mapping with signing_key")
    key = raw.get("signing_key")
    if key is None:
        return None
    if not isinstance(key, str) or not key:
        raise _fail("webhooks.signing_key: expected a non-empty string")
    return key


def _webui_dir(value: Any) -> pathlib.Path | None:
    if value is None:
        return None
    path = _path(value, "webui_dir")
    if not path.is_dir():
        raise _fail(
            f"webui_dir: {path} is not a directory (a WebUI build, e.g. from "
            "scripts/webui.sh watch DIR)"
        )
    return path


def deploy_facts(cfg: MasterConfig) -> dict[str, Any]:
    """What `det deploy local cluster-up --master-config` needs of a checked config
    (``det-master --check-config``): the CLI never imports the master."""
    return {
        "port": cfg.port,
        "data_dir": str(cfg.data_dir),
        "agent_token_path": str(cfg.agent_token_path),
        "default_resource_pool": cfg.default_resource_pool,
    }


def printable(cfg: MasterConfig) -> dict[str, Any]:
    """The effective config as `det master config` shows it (Determined's GetMasterConfig):
    every setting, defaults included, as JSON values, with the webhook signing key and the
    checkpoint storage's credentials left out."""

    def plain(value: Any) -> Any:
        if isinstance(value, pathlib.Path):
            return str(value)
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    out: dict[str, Any] = plain(dataclasses.asdict(cfg))
    out["checkpoint_storage"] = redaction.redacted({"checkpoint_storage": cfg.storage()})[
        "checkpoint_storage"
    ]
    if out.get("webhook_signing_key"):
        out["webhook_signing_key"] = redaction.REDACTED
    out["retention_policy"] = {"log_retention_days": out.pop("log_retention_days")}
    # Determined's shape; PatchMasterConfig changes it.
    out["log"] = {"level": out.pop("log_level"), "color": False}
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="det-master", description="Run the pydet master.")
    p.add_argument("--config-file", help="YAML master config; flags override it")
    p.add_argument("--host", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--port", type=int, help="port for gRPC, the API and the WebUI (default 8080)")
    p.add_argument("--data-dir", dest="data_dir", help="where the database and checkpoints live")
    p.add_argument("--checkpoint-path", help="default shared_fs checkpoint directory")
    p.add_argument(
        "--agent-reconnect-timeout",
        type=float,
        dest="agent_reconnect_timeout",
        help="seconds to wait for a lost agent before restarting its trials (default 60)",
    )
    p.add_argument("--log-level", dest="log_level", help="debug, info, warning or error")
    p.add_argument(
        "--webui-dir",
        dest="webui_dir",
        metavar="DIR",
        help="serve the WebUI from DIR, a development build (scripts/webui.sh watch DIR), "
        "instead of the one installed with pydet",
    )
    p.add_argument(
        "--check-config",
        action="store_true",
        help="check the config and flags, print what `det deploy` needs of them as JSON, "
        "and exit without starting",
    )
    return p
