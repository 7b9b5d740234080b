"""Kopf's webhook servers and tunnels, for `settings.admission.server`.

The controller serves the admission webhooks (`bosun run --admission-listen`, `--admission-cert`
…), so these serve nothing: each keeps Kopf's constructor parameters as attributes, which the
settings' conversion sends to the controller (where to listen, the host name the API server
calls, the certificate files). Tunnels (ngrok) have no counterpart and are reported as
ignored."""

from __future__ import annotations

import os
from typing import Any, AsyncIterator, Iterable, Optional, Union

from ._reviews import WebhookClientConfig, WebhookFn

StrPath = Union[str, os.PathLike]


class _Described:
    """What all servers and tunnels share: usable as `async with`, not callable here."""

    async def __aenter__(self) -> "_Described":
        return self

    async def __aexit__(self, *_: Any) -> None:
        return None

    def __call__(self, fn: WebhookFn) -> AsyncIterator[WebhookClientConfig]:
        raise RuntimeError(f"{type(self).__name__} serves nothing in Bosun: the controller serves the admission "
                           "webhooks; set settings.admission.server in a startup handler, or use `bosun run "
                           "--admission-listen …`")


class WebhookServer(_Described):
    """An HTTPS endpoint for the webhooks: where to listen (`addr`, `port`), the host name in
    the webhooks' URL (`host`), the certificate (`certfile`, `pkeyfile`) and the CA bundle
    for the configurations (`cafile`); the other parameters are kept for Kopf's sake."""

    DEFAULT_HOST: Optional[str] = None

    def __init__(self, *, addr: Optional[str] = None, port: Optional[int] = None, path: Optional[str] = None,
                 host: Optional[str] = None, cadata: Optional[bytes] = None, cafile: Optional[StrPath] = None,
                 cadump: Optional[StrPath] = None, context: Any = None, insecure: bool = False,
                 certfile: Optional[StrPath] = None, pkeyfile: Optional[StrPath] = None, password: Optional[str] = None,
                 extra_sans: Iterable[str] = (), verify_mode: Any = None, verify_cafile: Optional[StrPath] = None,
                 verify_capath: Optional[StrPath] = None, verify_cadata: Union[str, bytes, None] = None,
                 file_check_interval: float = 60.) -> None:
        self.addr = addr
        self.port = port
        self.path = path
        self.host = host
        self.cadata = cadata
        self.cafile = cafile
        self.cadump = cadump
        self.context = context
        self.insecure = insecure
        self.certfile = certfile
        self.pkeyfile = pkeyfile
        self.password = password
        self.extra_sans = extra_sans
        self.verify_mode = verify_mode
        self.verify_cafile = verify_cafile
        self.verify_capath = verify_capath
        self.verify_cadata = verify_cadata
        self.file_check_interval = file_check_interval


class WebhookK3dServer(WebhookServer):
    """A server the API server of K3d/K3s reaches at `host.k3d.internal`."""

    DEFAULT_HOST = "host.k3d.internal"


class WebhookMinikubeServer(WebhookServer):
    """A server the API server of Minikube reaches at `host.minikube.internal`."""

    DEFAULT_HOST = "host.minikube.internal"


class WebhookDockerDesktopServer(WebhookServer):
    """A server the API server of Docker Desktop reaches at `host.docker.internal`."""

    DEFAULT_HOST = "host.docker.internal"


class WebhookAutoServer(WebhookServer):
    """A server whose host name Kopf guesses from the cluster; here the controller's own
    default applies."""


class WebhookNgrokTunnel(_Described):
    """A tunnel through ngrok (not available with Bosun: reported as ignored)."""

    def __init__(self, *, addr: Optional[str] = None, port: Optional[int] = None, path: Optional[str] = None,
                 token: Optional[str] = None, region: Optional[str] = None, binary: Optional[StrPath] = None) -> None:
        self.addr = addr
        self.port = port
        self.path = path
        self.token = token
        self.region = region
        self.binary = binary


class WebhookAutoTunnel(_Described):
    """A server or an ngrok tunnel, whichever Kopf finds possible (not available with Bosun:
    reported as ignored)."""

    def __init__(self, *, addr: Optional[str] = None, port: Optional[int] = None, path: Optional[str] = None) -> None:
        self.addr = addr
        self.port = port
        self.path = path
