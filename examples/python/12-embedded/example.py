"""An operator inside an application of its own: `kopf.operator()` is a coroutine, so the app
runs it as one more task of its event loop, next to its own work, and stops it with a flag.

The app here makes a few KopfExample objects, waits until the operator has stamped each in its
status, and deletes them; the handlers share the app's `memo` (each object's memo is a copy of
it, whose values are the same objects). Run it with a cluster in $KUBECONFIG (and
`examples/crd.yaml` applied): `python example.py`."""

import asyncio

import kubernetes

import bosun as kopf

OBJECTS = 3


@kopf.on.create("kopfexamples")
def stamp(name, memo, **_):
    memo.handled.append(name)
    return memo.template.format(name=name)  # stored as status.stamp


@kopf.on.delete("kopfexamples")
def unstamp(name, memo, **_):
    memo.handled.remove(name)


def custom_objects():
    kubernetes.config.load_kube_config()
    return kubernetes.client.CustomObjectsApi()


def stamped(api, name):
    kex = api.get_namespaced_custom_object("kopf.dev", "v1", "default", "kopfexamples", name)
    return kex.get("status", {}).get("stamp")


async def the_apps_own_work(memo):
    api = await asyncio.to_thread(custom_objects)
    names = [f"embedded-{n}" for n in range(OBJECTS)]
    for name in names:
        body = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name}, "spec": {}}
        await asyncio.to_thread(api.create_namespaced_custom_object, "kopf.dev", "v1", "default", "kopfexamples", body)
    for name in names:
        while (found := await asyncio.to_thread(stamped, api, name)) is None:
            await asyncio.sleep(0.2)
        print(f"The app sees {name} stamped {found!r}; the operator has handled {sorted(memo.handled)}.")
    for name in names:
        await asyncio.to_thread(api.delete_namespaced_custom_object, "kopf.dev", "v1", "default", "kopfexamples", name)
    while memo.handled:  # until the deletion handlers have run (their finalizers hold the objects)
        await asyncio.sleep(0.2)


async def main():
    memo = kopf.Memo(template="{name}, seen by the embedded operator", handled=[])
    ready, stop = asyncio.Event(), asyncio.Event()
    operator = asyncio.create_task(kopf.operator(namespaces=["default"], ready_flag=ready, stop_flag=stop, memo=memo))
    await ready.wait()
    print("The operator is ready; the app starts its work.")
    await the_apps_own_work(memo)
    print("The app's work is done; stopping the operator.")
    stop.set()
    exit_code = await operator
    print(f"The operator has stopped with exit code {exit_code}.")


if __name__ == "__main__":
    asyncio.run(main())
