"""EC2 through boto3: instances launched one at a time with the agent's startup script as
user data, tagged with the cluster, the pool and the agent id, found again by those tags.

boto3 is synchronous, so every call runs on a thread; its own retries are few and short
(the provisioner backs off a failing provider itself). Credentials and the endpoint come
from boto3's usual places (environment, ~/.aws, an instance profile; ``AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pydet.master.provisioner.decider import Instance, InstanceState
from pydet.master.provisioner.provider import ProviderError
from pydet.master.provisioner.settings import AwsSettings

POOL_TAG = "pydet:pool"
AGENT_TAG = "pydet:agent-id"

_STATES = {
    "pending": InstanceState.STARTING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPING,
    "shutting-down": InstanceState.STOPPING,
    "stopped": InstanceState.STOPPED,
    "terminated": InstanceState.TERMINATED,
}
_LIVE = ["pending", "running", "stopping", "stopped", "shutting-down"]


class AwsProvider:
    def __init__(self, settings: AwsSettings, *, pool: str, cluster_id: str) -> None:
        self.settings = settings
        self.pool = pool
        self.tag_value = settings.tag_value or cluster_id
        self._client: Any = None

    def _ec2(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.session.Session().client(
                "ec2",
                region_name=self.settings.region,
                config=Config(
                    connect_timeout=5,
                    read_timeout=30,
                    retries={"max_attempts": 2, "mode": "standard"},
                ),
            )
        return self._client

    async def list_instances(self) -> list[Instance]:
        filters = [
            {"Name": f"tag:{self.settings.tag_key}", "Values": [self.tag_value]},
            {"Name": f"tag:{POOL_TAG}", "Values": [self.pool]},
            {"Name": "instance-state-name", "Values": _LIVE},
        ]

        def describe() -> list[Instance]:
            out: list[Instance] = []
            pages = self._ec2().get_paginator("describe_instances").paginate(Filters=filters)
            for page in pages:
                for reservation in page.get("Reservations", []):
                    out.extend(_instance(i) for i in reservation.get("Instances", []))
            return out

        listed: list[Instance] = await _call("list instances", describe)
        return listed

    async def launch(self, agent_id: str, startup: str) -> Instance:
        s = self.settings
        tags = [
            {"Key": s.tag_key, "Value": self.tag_value},
            {"Key": POOL_TAG, "Value": self.pool},
            {"Key": AGENT_TAG, "Value": agent_id},
            {"Key": "Name", "Value": s.instance_name},
            *({"Key": k, "Value": v} for k, v in s.custom_tags),
        ]
        nic: dict[str, Any] = {"DeviceIndex": 0, "AssociatePublicIpAddress": s.public_ip}
        if s.subnet_id:
            nic["SubnetId"] = s.subnet_id
        if s.security_group_id:
            nic["Groups"] = [s.security_group_id]
        request: dict[str, Any] = {
            "ImageId": s.image_id,
            "InstanceType": s.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": startup,
            "NetworkInterfaces": [nic],
            "BlockDeviceMappings": [
                {
                    "DeviceName": "/dev/sda1",
                    "Ebs": {"VolumeSize": s.root_volume_size, "DeleteOnTermination": True},
                }
            ],
            "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}],
        }
        if s.ssh_key_name:
            request["KeyName"] = s.ssh_key_name
        if s.iam_instance_profile_arn:
            request["IamInstanceProfile"] = {"Arn": s.iam_instance_profile_arn}
        if s.spot:
            spot: dict[str, Any] = {
                "SpotInstanceType": "one-time",
                "InstanceInterruptionBehavior": "terminate",
            }
            if s.spot_max_price:
                spot["MaxPrice"] = s.spot_max_price
            request["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": spot}

        def run() -> Instance:
            reply = self._ec2().run_instances(**request)
            return _instance(reply["Instances"][0], agent_id=agent_id)

        launched: Instance = await _call(f"launch a {s.instance_type} instance", run)
        return launched

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        ids = list(instance_ids)
        await _call(
            f"terminate {', '.join(ids)}", lambda: self._ec2().terminate_instances(InstanceIds=ids)
        )


def _instance(raw: dict[str, Any], *, agent_id: str = "") -> Instance:
    tags = {t.get("Key"): t.get("Value", "") for t in raw.get("Tags", [])}
    launched = raw.get("LaunchTime")
    return Instance(
        id=raw["InstanceId"],
        state=_STATES.get(raw.get("State", {}).get("Name", ""), InstanceState.STARTING),
        launched_at=launched.timestamp() if launched is not None else 0.0,
        agent_id=tags.get(AGENT_TAG) or agent_id,
    )


async def _call(what: str, fn: Any) -> Any:
    """``fn`` on a thread; boto3's failures become one line that says what to do."""
    from botocore import exceptions as aws

    try:
        return await asyncio.to_thread(fn)
    except aws.NoCredentialsError:
        raise ProviderError(
            f"cannot {what}: no AWS credentials (the master's environment, ~/.aws or an "
            "instance profile)"
        ) from None
    except aws.ClientError as e:
        err = e.response.get("Error", {})
        code, message = err.get("Code", "Error"), err.get("Message", str(e))
        raise ProviderError(f"cannot {what}: {code}: {' '.join(str(message).split())}") from None
    except aws.BotoCoreError as e:
        raise ProviderError(f"cannot {what}: {' '.join(str(e).split())}") from None
