"""The installed stubs match the contract in this checkout: the build generates them from
proto/bosun/v1/handler.proto, and a changed .proto needs the package built again."""

from __future__ import annotations

import pathlib

from google.protobuf import descriptor_pb2
from grpc_tools import protoc
import grpc_tools

import bosun.v1.handler_pb2 as installed

PROTO_DIR = pathlib.Path(__file__).resolve().parents[2] / "proto"


def test_the_stubs_are_generated_from_this_checkouts_contract(tmp_path):
    out = tmp_path / "handler.desc"
    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    assert protoc.main(["protoc", f"-I{PROTO_DIR}", f"-I{include}", f"--descriptor_set_out={out}",
                        "bosun/v1/handler.proto"]) == 0
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in _messages(fresh.message_type):  # protoc's Python gencode leaves json_name out
        for field in message.field:
            field.ClearField("json_name")
    current = descriptor_pb2.FileDescriptorProto.FromString(installed.DESCRIPTOR.serialized_pb)
    assert current == fresh, (
        f"the installed stubs ({installed.__file__}) are stale: proto/bosun/v1/handler.proto changed since the "
        "SDK was built; run `pip install ./sdk-python` again (or `BOSUN_STUBS_ONLY=. python setup.py` in sdk-python/)")


def _messages(messages):
    for message in messages:
        yield message
        yield from _messages(message.nested_type)
