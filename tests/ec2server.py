"""A fake EC2 for tests: moto's server (tests/motoserver.py) answering the EC2 API.

moto only keeps books: its instances run nothing. tests/cloud.py makes them hosts, in the
network namespaces of a tests/netns.py ``Network``, so ``subnet(network)`` gives moto a
VPC there: the instances get private addresses the hosts can take. A master reaches this
server through ``env()`` (boto3 honours ``AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

from tests.motoserver import MotoServer, serve
from tests.netns import Network

# Any image id does for moto; this one names what tests launch.
IMAGE_ID = "ami-0pydet0test0host"


class EC2Server(MotoServer):
    def __init__(self, log_dir: pathlib.Path) -> None:
        super().__init__(log_dir)
        self._client: Any = None

    @property
    def client(self) -> Any:
        """A boto3 EC2 client (``mypy_boto3_ec2.EC2Client``) for this server."""
        if self._client is None:
            self._client = self.make_client("ec2")
        return self._client

    def subnet(self, network: Network) -> str:
        """A new VPC on ``network``'s /24 and a subnet of it; returns the subnet's id.

        The subnet is the upper half, ``.128/25``: moto hands out its addresses from
        ``.132`` up (AWS keeps the first four), clear of the hosts ``network.add_host()``
        numbers from ``.1``. Launch with ``SubnetId=`` this: without a subnet moto picks
        addresses in private ranges (its default VPC, 10/8, 172.31/16) that a test must not
        use, and tests/cloud.py refuses such instances.
        """
        vpc = self.client.create_vpc(CidrBlock=f"{network.subnet}.0/24")["Vpc"]["VpcId"]
        subnet = self.client.create_subnet(VpcId=vpc, CidrBlock=f"{network.subnet}.128/25")
        return str(subnet["Subnet"]["SubnetId"])

    def run(self, subnet_id: str, user_data: str, count: int = 1, **extra: Any) -> list[str]:
        """Launches ``count`` instances in ``subnet_id``; their ids."""
        reply = self.client.run_instances(
            ImageId=IMAGE_ID,
            InstanceType="t3.micro",
            MinCount=count,
            MaxCount=count,
            SubnetId=subnet_id,
            UserData=user_data,
            **extra,
        )
        return [str(i["InstanceId"]) for i in reply["Instances"]]

    def terminate(self, *instance_ids: str) -> None:
        self.client.terminate_instances(InstanceIds=list(instance_ids))


def ec2_server(tmp_path_factory: Any) -> Iterator[EC2Server]:
    """A fixture's body: a started server, stopped at teardown."""
    yield from serve(EC2Server(tmp_path_factory.mktemp("moto-ec2")))
