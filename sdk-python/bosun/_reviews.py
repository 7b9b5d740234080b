"""Kopf's type names of admission: the review's parts handlers get as kwargs (`userinfo`,
`headers`, `sslpeer`, `operation`), and the webhook client configurations and server protocol
of Kopf's custom webhook servers. Type hints only: the controller speaks to the API server."""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Literal, Optional, Protocol, TypedDict

#: The HTTP headers of an admission request (the `headers` kwarg).
Headers = Dict[str, str]
#: The API server's TLS client certificate, as `ssl` describes it (the `sslpeer` kwarg).
SSLPeer = Dict[str, Any]
#: What an admission request is about (the `operation` kwarg).
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class UserInfo(TypedDict):
    """Who made the request under review (the `userinfo` kwarg)."""

    username: str
    uid: str
    groups: List[str]


class WebhookClientConfigService(TypedDict, total=False):
    """The Service the API server calls webhooks through."""

    namespace: Optional[str]
    name: Optional[str]
    path: Optional[str]
    port: Optional[int]


class WebhookClientConfig(TypedDict, total=False):
    """How the API server reaches the webhooks: a URL or a Service, and the CA bundle."""

    caBundle: Optional[str]
    url: Optional[str]
    service: Optional[WebhookClientConfigService]


class WebhookFn(Protocol):
    """What a Kopf webhook server calls for each admission request."""

    def __call__(self, request: Dict[str, Any], *, webhook: Optional[str] = None, headers: Optional[Headers] = None,
                 sslpeer: Optional[SSLPeer] = None) -> Awaitable[Dict[str, Any]]:
        ...


#: A Kopf webhook server: called with the function to serve, it yields client configurations.
WebhookServerProtocol = Callable[[WebhookFn], AsyncIterator[WebhookClientConfig]]
