import asyncio
import os

import bosun
import kubernetes.client
import kubernetes.config

# How long a pod may live: 30 seconds as in Kopf, or $POD_KILL_AFTER_SECONDS.
TIMEOUT = int(os.environ.get('POD_KILL_AFTER_SECONDS', '30'))

tasks = {}  # dict{namespace: dict{name: asyncio.Task}}


@bosun.on.resume('pods', id='pod_in_sight_on_resume')  # ids are unique across causes
@bosun.on.create('pods')
async def pod_in_sight(namespace, name, logger, **kwargs):
    if namespace.startswith('kube-'):
        return
    else:
        logger.info(f"=== Pod killing happens in {TIMEOUT}s.")
        if name not in tasks.get(namespace, {}):  # calls are at-least-once: keep a scheduled killer
            task = asyncio.create_task(pod_killer(namespace, name, TIMEOUT))
            tasks.setdefault(namespace, {})
            tasks[namespace][name] = task


@bosun.on.delete('pods')
async def pod_deleted(namespace, name, logger, **kwargs):
    if namespace in tasks and name in tasks[namespace]:
        task = tasks[namespace][name]
        task.cancel()  # it will also remove from `tasks`
        logger.info("=== Pod killing is cancelled!")


async def pod_killer(namespace, name, timeout=30):
    try:
        await asyncio.sleep(timeout)
        # Outside of any handler call: to the handler server's output, not to the controller's log.
        print(f"[{namespace}/{name}] === Pod killing happens NOW!", flush=True)

        kubernetes.config.load_kube_config()  # $KUBECONFIG, which `bosun dev` sets
        api = kubernetes.client.CoreV1Api()
        await asyncio.to_thread(api.delete_namespaced_pod, name, namespace)

    finally:
        if namespace in tasks and name in tasks[namespace]:
            del tasks[namespace][name]
