"""Logging in the handler server's own API clients, as Kopf's login does: operators call
`kubernetes.client.CoreV1Api()` with no setup because Kopf's default login configured the
`kubernetes` client. The controller has credentials of its own (kubeconfig, `--context`, the
pod's service account) and gives the same cluster to the handler server it starts
(`KUBECONFIG`, `BOSUN_CONTEXT`); the login here configures the clients from it.

As in Kopf: `@bosun.on.login` handlers, when registered, run when the server starts (retried as
Kopf retries activities; what they return is not used by the controller); otherwise Kopf's
default logins run for the client libraries that are installed — `login_via_client` configures
the `kubernetes` client, `login_via_pykube` checks pykube's credentials (its users build
`pykube.KubeConfig.from_env()` themselves). Like Kopf, that imports an installed library at
start even if the handlers never use it."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import importlib.util
import logging
import os
from typing import Any, Optional, Sequence, Union

log = logging.getLogger("bosun")

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


class LoginError(Exception):
    """Raised when the operator cannot log in to the API (Kopf's `kopf.LoginError`)."""


@dataclasses.dataclass(frozen=True)
class ConnectionInfo:
    """One endpoint with its credentials, as a login handler returns it (Kopf's
    `kopf.ConnectionInfo`)."""

    server: str
    ca_path: Optional[PathLike] = None
    ca_data: Optional[Union[str, bytes]] = None
    insecure: Optional[bool] = None
    username: Optional[str] = None
    password: Optional[str] = None
    scheme: Optional[str] = None
    token: Optional[str] = None
    certificate_path: Optional[PathLike] = None
    certificate_data: Optional[Union[str, bytes]] = None
    private_key_path: Optional[PathLike] = None
    private_key_data: Optional[Union[str, bytes]] = None
    default_namespace: Optional[str] = None
    proxy_url: Optional[str] = None
    trust_env: bool = False
    priority: int = 0
    expiration: Optional[datetime.datetime] = None

    def __post_init__(self) -> None:
        for path, data in (("ca_path", "ca_data"), ("certificate_path", "certificate_data"),
                           ("private_key_path", "private_key_data")):
            if getattr(self, path) and getattr(self, data):
                raise ValueError(f"both {path} and {data} are set: give only one")


def _trust_env(settings: Any) -> bool:
    return bool(getattr(getattr(settings, "networking", None), "trust_env", False))


def _split_authorization(header: Optional[str]):
    parts = header.split(" ", 1) if header else []
    if not parts:
        return None, None
    return (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def login_via_client(*, logger: Optional[logging.Logger] = None, settings: Any = None, **_: Any) -> Optional[ConnectionInfo]:
    """Configures the `kubernetes` client (in the cluster with the pod's service account,
    else from the kubeconfig) and returns its credentials; None without the client."""
    logger = logger or log
    try:
        import kubernetes.config
    except ImportError:
        return None
    try:
        kubernetes.config.load_incluster_config()
        logger.debug("Client is configured in cluster with service account.")
    except kubernetes.config.ConfigException:
        try:
            # The context the controller was given (`bosun run --context`), else the current one.
            kubernetes.config.load_kube_config(context=os.environ.get("BOSUN_CONTEXT") or None)
            logger.debug("Client is configured via kubeconfig file.")
        except kubernetes.config.ConfigException as e:
            raise LoginError(f"Cannot authenticate the client library neither in-cluster, nor via kubeconfig: {e}") from None
    config = kubernetes.client.Configuration.get_default_copy()
    header = config.get_api_key_with_prefix("BearerToken") or config.get_api_key_with_prefix("authorization")
    scheme, token = _split_authorization(header)
    return ConnectionInfo(server=config.host, ca_path=config.ssl_ca_cert, insecure=not config.verify_ssl,
                          username=config.username or None, password=config.password or None, scheme=scheme, token=token,
                          certificate_path=config.cert_file, private_key_path=config.key_file,
                          trust_env=_trust_env(settings), priority=10)


async def login_via_async_client(*, logger: Optional[logging.Logger] = None, settings: Any = None,
                                 **_: Any) -> Optional[ConnectionInfo]:
    """Configures the `kubernetes_asyncio` client, as `login_via_client` does the sync one."""
    logger = logger or log
    try:
        import kubernetes_asyncio.config
    except ImportError:
        return None
    try:
        kubernetes_asyncio.config.load_incluster_config()
        logger.debug("Async client is configured in cluster with service account.")
    except kubernetes_asyncio.config.ConfigException:
        try:
            await kubernetes_asyncio.config.load_kube_config()
            logger.debug("Async client is configured via kubeconfig file.")
        except kubernetes_asyncio.config.ConfigException as e:
            raise LoginError(f"Cannot authenticate the async client library neither in-cluster, nor via kubeconfig: {e}") from None
    config = kubernetes_asyncio.client.Configuration.get_default_copy()
    header = config.get_api_key_with_prefix("BearerToken")
    if asyncio.iscoroutine(header):
        header = await header
    scheme, token = _split_authorization(header)
    return ConnectionInfo(server=config.host, ca_path=config.ssl_ca_cert, insecure=not config.verify_ssl,
                          username=config.username or None, password=config.password or None, scheme=scheme, token=token,
                          certificate_path=config.cert_file, private_key_path=config.key_file, proxy_url=config.proxy,
                          trust_env=_trust_env(settings), priority=15)


def login_via_pykube(*, logger: Optional[logging.Logger] = None, settings: Any = None, **_: Any) -> Optional[ConnectionInfo]:
    """The credentials `pykube` finds (the pod's service account, else the kubeconfig); None
    without pykube."""
    logger = logger or log
    try:
        import pykube
    except ImportError:
        return None
    try:
        config = pykube.KubeConfig.from_service_account()
        logger.debug("Pykube is configured in cluster with service account.")
    except FileNotFoundError:
        try:
            config = pykube.KubeConfig.from_file()
            logger.debug("Pykube is configured via kubeconfig file.")
        except (pykube.PyKubeError, FileNotFoundError) as e:
            raise LoginError(f"Cannot authenticate pykube neither in-cluster, nor via kubeconfig: {e}") from None
    ca = config.cluster.get("certificate-authority")
    cert = config.user.get("client-certificate")
    pkey = config.user.get("client-key")
    return ConnectionInfo(server=config.cluster.get("server"), ca_path=ca.filename() if ca else None,
                          insecure=config.cluster.get("insecure-skip-tls-verify"), username=config.user.get("username"),
                          password=config.user.get("password"), token=config.user.get("token"),
                          certificate_path=cert.filename() if cert else None,
                          private_key_path=pkey.filename() if pkey else None, default_namespace=config.namespace,
                          proxy_url=config.cluster.get("proxy-url"), trust_env=_trust_env(settings), priority=20)


_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def login_with_service_account(*, settings: Any = None, **_: Any) -> Optional[ConnectionInfo]:
    """The pod's service account, read directly (no client library needed); None outside a pod."""
    token_path = os.path.join(_SERVICE_ACCOUNT, "token")
    if not os.path.exists(token_path):
        return None
    with open(token_path, encoding="utf-8") as f:
        token = f.read().strip()
    namespace_path = os.path.join(_SERVICE_ACCOUNT, "namespace")
    namespace = None
    if os.path.exists(namespace_path):
        with open(namespace_path, encoding="utf-8") as f:
            namespace = f.read().strip()
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise LoginError("the service account is mounted, but KUBERNETES_SERVICE_HOST is not set")
    ca = os.path.join(_SERVICE_ACCOUNT, "ca.crt")
    return ConnectionInfo(server=f"https://{host}:{port}", ca_path=ca if os.path.exists(ca) else None, scheme="Bearer",
                          token=token or None, default_namespace=namespace, trust_env=_trust_env(settings), priority=20)


def login_with_kubeconfig(*, settings: Any = None, **_: Any) -> Optional[ConnectionInfo]:
    """The current context of the kubeconfig (`$KUBECONFIG`, else `~/.kube/config`), read
    directly: server, CA, token or client certificate; None without a kubeconfig."""
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p] or [os.path.expanduser("~/.kube/config")]
    path = next((p for p in paths if os.path.exists(p)), None)
    if path is None:
        return None
    try:
        import yaml
    except ImportError:
        raise LoginError("reading the kubeconfig needs pyyaml (pip install pyyaml)") from None
    with open(path, encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    context_name = config.get("current-context")
    context = _named(config.get("contexts"), context_name).get("context", {})
    cluster = _named(config.get("clusters"), context.get("cluster")).get("cluster", {})
    user = _named(config.get("users"), context.get("user")).get("user", {})
    base = os.path.dirname(path)

    def relative(p: Optional[str]) -> Optional[str]:
        return None if not p else p if os.path.isabs(p) else os.path.join(base, p)

    return ConnectionInfo(server=cluster.get("server"), ca_path=relative(cluster.get("certificate-authority")),
                          ca_data=cluster.get("certificate-authority-data"),
                          insecure=cluster.get("insecure-skip-tls-verify"), username=user.get("username"),
                          password=user.get("password"), token=user.get("token"),
                          certificate_path=relative(user.get("client-certificate")),
                          certificate_data=user.get("client-certificate-data"),
                          private_key_path=relative(user.get("client-key")), private_key_data=user.get("client-key-data"),
                          default_namespace=context.get("namespace"), trust_env=_trust_env(settings), priority=10)


def _named(items: Any, name: Optional[str]) -> dict:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item
    return {}


#: Kopf's default logins, run when the operator registers no login handler of its own: each
#: for a client library that is installed (Kopf's `login_via_pykube` and `login_via_client`).
DEFAULT_LOGINS = (("pykube", "login_via_pykube"), ("kubernetes", "login_via_client"))


def _installed(library: str) -> bool:
    try:
        return importlib.util.find_spec(library) is not None
    except (ImportError, ValueError):
        return False


async def login(registry: Any, settings: Any) -> None:
    """Logs the handler server in when it starts, as Kopf's operator does: the `@on.login`
    handlers of `registry`, else Kopf's default logins for the client libraries installed
    (which configure the `kubernetes` client). Each success is logged in Kopf's words
    (`Activity 'login_via_client' succeeded.`). A login handler that fails for good raises
    `LoginError`; a default login that fails is a warning (the controller has its own
    credentials; only the handlers' own clients go without)."""
    handlers: Sequence[Any] = [h for h in registry.handlers if h.kind == "login"]
    for handler in handlers:
        await _run_login(handler, settings)
        log.info("Activity %r succeeded.", handler.id)
    if handlers:
        return
    for library, name in DEFAULT_LOGINS:
        if not _installed(library):
            continue
        try:
            globals()[name](logger=log, settings=settings)
        except LoginError as e:
            log.warning("Activity %r failed: %s", name, e)
        else:
            log.info("Activity %r succeeded.", name)


async def _run_login(handler: Any, settings: Any) -> Any:
    """One login handler, retried as Kopf retries activities: temporary errors after their
    delay, unexpected ones after the backoff unless its errors mode says otherwise."""
    from ._errors import ErrorsMode, PermanentError, TemporaryError
    from ._kwargs import invoke

    retry = 0
    started = datetime.datetime.now(datetime.timezone.utc)
    while True:
        kwargs = dict(logger=log, settings=settings, retry=retry, started=started, param=handler.param,
                      runtime=datetime.datetime.now(datetime.timezone.utc) - started)
        try:
            return await invoke(handler.fn, kwargs)
        except TemporaryError as e:
            delay = e.delay if e.delay is not None else (handler.backoff if handler.backoff is not None else 60)
            reason = str(e)
        except PermanentError as e:
            raise LoginError(f"Login handler {handler.id!r} failed permanently: {e}") from e
        except Exception as e:
            if handler.errors == ErrorsMode.PERMANENT:
                raise LoginError(f"Login handler {handler.id!r} failed permanently: {e!r}") from e
            if handler.errors == ErrorsMode.IGNORED:
                log.warning("Login handler %r failed, ignored: %r", handler.id, e)
                return None
            delay, reason = (handler.backoff if handler.backoff is not None else 60), repr(e)
        retry += 1
        if handler.retries is not None and retry >= handler.retries:
            raise LoginError(f"Login handler {handler.id!r} has exceeded {handler.retries} retries: {reason}")
        log.warning("Login handler %r failed temporarily: %s; retrying in %s s.", handler.id, reason, delay)
        await asyncio.sleep(float(delay))
