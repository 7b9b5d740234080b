import asyncio
import contextlib
import threading
import time

import bosun
import kubernetes.client
import kubernetes.client.rest
import kubernetes.config


@bosun.on.create('kopf.dev', 'v1', 'kopfexamples')
def create_fn(**_):
    pass


@bosun.on.delete('kopf.dev', 'v1', 'kopfexamples')
def delete_fn(**_):
    pass


def bosun_thread(
        ready_flag: threading.Event,
        stop_flag: threading.Event,
):
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    with contextlib.closing(loop):

        bosun.configure(verbose=True)  # log formatting

        loop.run_until_complete(bosun.operator(
            ready_flag=ready_flag,
            stop_flag=stop_flag,
        ))


def main(steps=3):
    kubernetes.config.load_kube_config()  # $KUBECONFIG, as the controller uses it

    # Start the operator and let it initialise.
    print("Starting the main app.", flush=True)
    ready_flag = threading.Event()
    stop_flag = threading.Event()
    thread = threading.Thread(target=bosun_thread, kwargs=dict(
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    ))
    thread.start()
    ready_flag.wait()

    # The operator is active: run the app's activity.
    for step in range(steps):
        print(f"Do the main app activity here. Step {step+1}/{steps}.", flush=True)
        _create_object(step)
        time.sleep(1.0)
        _delete_object(step)
        time.sleep(1.0)

    # Ask the operator to terminate gracefully (can take a couple of seconds).
    print("Exiting the main app.", flush=True)
    stop_flag.set()
    thread.join()


def _create_object(step):
    try:
        api = kubernetes.client.CustomObjectsApi()
        api.create_namespaced_custom_object(
            group='kopf.dev',
            version='v1',
            plural='kopfexamples',
            namespace='default',
            body=dict(
                apiVersion='kopf.dev/v1',
                kind='KopfExample',
                metadata=dict(name=f'kopf-example-{step}'),
            ),
        )
    except kubernetes.client.rest.ApiException as e:
        if e.status in [409]:
            pass
        else:
            raise


def _delete_object(step):
    try:
        api = kubernetes.client.CustomObjectsApi()
        api.delete_namespaced_custom_object(
            group='kopf.dev',
            version='v1',
            plural='kopfexamples',
            namespace='default',
            name=f'kopf-example-{step}',
            body={},
        )
    except kubernetes.client.rest.ApiException as e:
        if e.status in [404]:
            pass
        else:
            raise


if __name__ == '__main__':
    main()
