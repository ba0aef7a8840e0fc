"""What ``determined.common.wire`` adds around the protobuf encoding itself.

The encoding is held to the official protobuf runtime in test_wire_oracle.py. Here: every
``v1`` class gets a fast plan, decoded messages behave as betterproto2 messages built by hand,
a message no protobuf runtime could hold is refused, and ``WireCodec`` answers malformed bytes
with ``INVALID_ARGUMENT`` on a real grpclib server.
"""

from __future__ import annotations

import inspect

import betterproto2
import grpclib.const
import grpclib.exceptions
import grpclib.testing
import pytest

from determined.api.gen import v1
from determined.common import wire

V1_MESSAGES = sorted(
    (
        cls
        for _, cls in inspect.getmembers(v1, inspect.isclass)
        if issubclass(cls, betterproto2.Message) and cls.__module__ == v1.__name__
    ),
    key=lambda cls: cls.__name__,
)


def test_every_v1_message_gets_a_plan() -> None:
    assert len(V1_MESSAGES) > 50
    for cls in V1_MESSAGES:
        assert wire._plan(cls) is not None, cls  # none falls back to betterproto2's slow path


@pytest.mark.parametrize("cls", V1_MESSAGES, ids=lambda c: c.__name__)
def test_defaults_encode_to_nothing_and_decode_from_nothing(
    cls: type[betterproto2.Message],
) -> None:
    assert wire.encode(cls()) == b""
    assert wire.decode(cls, b"") == cls()


def test_decoded_messages_behave_like_messages_built_by_hand() -> None:
    message = v1.StartContainer(
        container_id="c1",
        argv=["python3", "-c", "pass"],
        env={"A": "1", "É": "ü"},
        spec=v1.ContainerSpec(image="img", shm_size=-1, labels={"k": "v"}),
    )
    decoded = wire.decode(v1.StartContainer, memoryview(wire.encode(message)))
    assert decoded == message
    assert decoded.to_dict() == message.to_dict()
    assert repr(decoded) == repr(message)
    decoded.argv.append("x")  # lists and dicts are the message's own
    assert wire.decode(v1.StartContainer, wire.encode(message)).argv == ["python3", "-c", "pass"]
    hello = wire.decode(v1.AgentMessage, wire.encode(v1.AgentMessage(hello=v1.AgentHello())))
    assert betterproto2.which_one_of(hello, "msg")[0] == "hello"


def test_a_message_with_two_oneof_members_set_is_refused() -> None:
    both = v1.AgentMessage(hello=v1.AgentHello(agent_id="a"), exited=v1.ContainerExited())
    message = r"AgentMessage has 2 members of oneof 'msg' set \(hello, exited\)"
    with pytest.raises(ValueError, match=message):
        wire.encode(both)
    with pytest.raises(ValueError, match=message):
        wire.WireCodec().encode(both, v1.AgentMessage)


def test_malformed_bytes_raise_decode_error_with_the_reason() -> None:
    with pytest.raises(wire.DecodeError, match="not a valid Job: truncated input"):
        wire.decode(v1.Job, b"\x38")  # priority (7), an int32, cut off
    with pytest.raises(ValueError):  # DecodeError is a ValueError
        wire.decode(v1.Job, b"\x52\x01\xff")  # job_id (10), not UTF-8


def test_codec() -> None:
    codec = wire.WireCodec()
    job = v1.Job(job_id="x", priority=3)
    assert codec.__content_subtype__ == "proto"
    assert codec.encode(job, v1.Job) == wire.encode(job)
    assert codec.decode(wire.encode(job), v1.Job) == job
    with pytest.raises(TypeError):
        codec.encode(job, v1.Experiment)
    with pytest.raises(grpclib.exceptions.GRPCError) as raised:
        codec.decode(b"\x0a\x05ab", v1.Job)
    assert raised.value.status == grpclib.const.Status.INVALID_ARGUMENT

    class Raw:
        def SerializeToString(self) -> bytes:
            return b"raw"

        @classmethod
        def FromString(cls, data: bytes) -> bytes:
            return data[::-1]

    assert codec.encode(Raw(), Raw) == b"raw"
    assert codec.decode(b"ab", Raw) == b"ba"


class _Garbage:
    """A request whose bytes are not a valid GetMasterRequest."""

    def SerializeToString(self) -> bytes:
        return b"\x0a\x05ab"  # field 1, five bytes long, of which two are there


class _Master(v1.DeterminedBase):
    async def get_master(self, message: v1.GetMasterRequest) -> v1.GetMasterResponse:
        return v1.GetMasterResponse(version="1")


async def test_a_server_answers_a_malformed_request_with_invalid_argument() -> None:
    async with grpclib.testing.ChannelFor([_Master()], codec=wire.WireCodec()) as channel:
        assert (await v1.DeterminedStub(channel).get_master(v1.GetMasterRequest())).version == "1"
        with pytest.raises(grpclib.exceptions.GRPCError) as raised:
            async with channel.request(
                "/v1.Determined/GetMaster",
                grpclib.const.Cardinality.UNARY_UNARY,
                _Garbage,
                v1.GetMasterResponse,
            ) as stream:
                await stream.send_message(_Garbage(), end=True)
                await stream.recv_message()
    assert raised.value.status == grpclib.const.Status.INVALID_ARGUMENT
    assert raised.value.message == (
        "malformed message: not a valid GetMasterRequest: "
        "length-delimited field runs past the end of its message"
    )
