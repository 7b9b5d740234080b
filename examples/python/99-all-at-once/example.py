"""
Kubernetes operator example: all the features at once (for debugging & testing).
"""
import asyncio
import pprint
import time

import bosun
import kubernetes.client
import kubernetes.config
import yaml


@bosun.on.startup()
async def startup_fn_simple(logger, **kwargs):
    logger.info('Starting in 1s...')
    await asyncio.sleep(1)


@bosun.on.startup()
async def startup_fn_retried(retry, logger, **kwargs):
    if retry < 3:
        raise bosun.TemporaryError(f"Going to succeed in {3-retry}s", delay=1)
    else:
        logger.info('Starting retried...')
        # raise bosun.PermanentError("Unable to start!")


@bosun.on.cleanup()
async def cleanup_fn(logger, **kwargs):
    logger.info('Cleaning up in 3s...')
    await asyncio.sleep(3)


@bosun.on.create('kopfexamples')
def create_1(body, **kwargs):
    children = _create_children(owner=body)

    bosun.info(body, reason='AnyReason')
    bosun.event(body, type='Warning', reason='SomeReason', message="Cannot do something")
    bosun.event(children, type='Normal', reason='SomeReason', message="Created as part of the job1step")

    return {'job1-status': 100}


@bosun.on.create('kopfexamples', backoff=1)
def create_2(retry, **kwargs):
    wait_for_something()  # specific for job2, e.g. an external API poller

    if not retry:
        # will be retried by the framework, even if it has been restarted
        raise Exception("Whoops!")

    return {'job2-status': 100}


@bosun.on.update('kopfexamples')
def update(diff, **kwargs):
    print('Handling the diff')
    pprint.pprint(list(diff))


@bosun.on.field('kopfexamples', field='spec.lst')
def update_lst(old, new, **kwargs):
    print(f'Handling the FIELD = {old} -> {new}')


@bosun.on.delete('kopfexamples')
def delete(**kwargs):
    pass


def _create_children(owner):
    return []


def wait_for_something():
    # Note: intentionally blocking from the asyncio point of view.
    time.sleep(1)


@bosun.on.create('kopfexamples')
def create_pod(**kwargs):

    # Render the pod yaml with some spec fields used in the template.
    pod_data = yaml.safe_load("""
        apiVersion: v1
        kind: Pod
        spec:
          containers:
          - name: the-only-one
            image: busybox
            command: ["sh", "-x", "-c", "sleep 1"]
    """)

    # Make it our child: assign the namespace, name, labels, owner references, etc.
    bosun.adopt(pod_data)
    bosun.label(pod_data, {'application': 'kopf-example-10'})

    # Actually create an object by requesting the Kubernetes API.
    kubernetes.config.load_kube_config()  # $KUBECONFIG, which `bosun dev` sets
    api = kubernetes.client.CoreV1Api()
    api.create_namespaced_pod(namespace=pod_data['metadata']['namespace'], body=pod_data)


@bosun.on.event('pods', labels={'application': 'kopf-example-10'})
def example_pod_change(logger, **kwargs):
    logger.info("This pod is special for us.")
