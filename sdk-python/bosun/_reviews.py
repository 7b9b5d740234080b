"""Kopf's type names of admission: the review's parts handlers get as kwargs (`userinfo`,
`headers`, `sslpeer`, `operation`), and the webhook client configurations and server protocol
of Kopf's custom webhook servers. Type hints only: the controller speaks to the API server."""

from __future__ import annotations

from typing import (Any, AsyncIterator, Awaitable, Callable, Dict, Iterator, List, Literal, Mapping, Optional, Protocol,
                    TypedDict)

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


class RequestHeaders(Mapping[str, str]):
    """The webhook request's headers as the `headers` kwarg: read case-insensitively, as
    Kopf's (aiohttp's) are, so `headers.get('User-Agent')` finds `user-agent`."""

    def __init__(self, headers: Mapping[str, str]):
        self._headers = {str(k).lower(): str(v) for k, v in headers.items()}

    def __getitem__(self, name: str) -> str:
        return self._headers[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._headers

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)

    def __repr__(self) -> str:
        return f"RequestHeaders({self._headers!r})"
