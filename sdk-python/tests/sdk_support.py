"""What the SDK's tests share: a real handler server (the SDK's `serve` on a loopback port, in
a thread with its own event loop, with a real gRPC client to it) and a HandleRequest maker.

A module of its own, not conftest.py, so that the tests import it by its name: pytest imports
every conftest.py outside a package under one module name, `conftest`."""

from __future__ import annotations

import asyncio
import threading

import grpc

import bosun
from bosun.v1 import handler_pb2 as pb
from bosun.v1 import handler_pb2_grpc


class Server:
    def __init__(self, registry: bosun.Registry):
        self.registry = registry
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.stop_event = asyncio.Event()
        ready = asyncio.Event()

        async def main():
            task = asyncio.ensure_future(bosun.serve(self.registry, f"127.0.0.1:{self.port}", ready=ready, stop=self.stop_event))
            waiter = asyncio.ensure_future(ready.wait())
            await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
            self.ready.set()
            await task

        try:
            self.loop.run_until_complete(main())
        except BaseException as e:  # reported by start()
            self.error = e
            self.ready.set()

    def start(self):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.thread.start()
        assert self.ready.wait(10), "the handler server did not start within 10 s"
        if self.error:
            raise self.error
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = handler_pb2_grpc.HandlerServerStub(self.channel)
        return self

    def close(self):
        self.channel.close()
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(10)


def request(handler_id, body=None, reason=pb.REASON_CREATE, **fields):
    import json

    body = body if body is not None else {
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "kex1", "namespace": "default", "uid": "uid-1", "labels": {"app": "a"}},
        "spec": {"field": "value", "items": ["item1", "item2"]},
    }
    return pb.HandleRequest(handler_id=handler_id, reason=reason, object=json.dumps(body).encode(),
                            resource=pb.Resource(group="kopf.dev", version="v1", plural="kopfexamples",
                                                 kind="KopfExample", namespaced=True), **fields)
