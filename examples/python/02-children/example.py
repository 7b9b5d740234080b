import bosun
import kubernetes.client
import kubernetes.config
import yaml


@bosun.on.create('kopfexamples')
def create_fn(spec, **kwargs):

    # Render the pod yaml with some spec fields used in the template.
    doc = yaml.safe_load(f"""
        apiVersion: v1
        kind: Pod
        spec:
          containers:
          - name: the-only-one
            image: busybox
            command: ["sh", "-x", "-c"]
            args:
            - |
              echo "FIELD=$FIELD"
              sleep {spec.get('duration', 0)}
            env:
            - name: FIELD
              value: {spec.get('field', 'default-value')}
    """)

    # Make it our child: assign the namespace, name, labels, owner references, etc.
    bosun.adopt(doc)

    # Actually create an object by requesting the Kubernetes API.
    kubernetes.config.load_kube_config()  # $KUBECONFIG, which `bosun dev` sets
    api = kubernetes.client.CoreV1Api()
    pod = api.create_namespaced_pod(namespace=doc['metadata']['namespace'], body=doc)

    # Update the parent's status.
    return {'children': [pod.metadata.uid]}
