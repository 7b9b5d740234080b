"""Children: objects a handler creates on behalf of the one it handles.

`kopf.adopt` makes a body a child (the owner reference, so that Kubernetes deletes it with its
parent; the parent's namespace and labels; a name derived from the parent's); the handler creates it with
any client, here the `kubernetes` package. `bosun.own` hands the creation to the controller
instead, which creates the child once the handler has succeeded."""

import kubernetes

import bosun

bosun.owns("kopfexamples", "v1/pods", "v1/configmaps")  # for `bosun rbac`'s roles


@bosun.on.create("kopfexamples")
def spawn_worker(name, spec, logger, **_):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": {"role": "worker"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "worker",
                "image": "busybox",
                "command": ["sleep", str(spec.get("duration", "10s"))],
                "env": [{"name": "FIELD", "value": str(spec.get("field", ""))}],
            }],
        },
    }
    bosun.adopt(pod)  # the owner reference, namespace, labels and generateName

    kubernetes.config.load_kube_config()  # the dev cluster's, from $KUBECONFIG
    with kubernetes.client.ApiClient() as client:
        created = kubernetes.client.CoreV1Api(client).create_namespaced_pod(pod["metadata"]["namespace"], pod)
    logger.info(f"Started the worker pod {created.metadata.name}")

    # Created by the controller after this handler succeeded, named `<parent>-configmap`.
    bosun.own({"apiVersion": "v1", "kind": "ConfigMap", "data": {"items": ",".join(spec.get("items", []))}})

    return {"workers": [created.metadata.uid]}
