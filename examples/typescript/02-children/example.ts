// Kopf's example 02: a child pod per object. Kopf's version creates the pod itself with
// pykube after `kopf.adopt()`; here the controller creates and adopts it (`bosun.own`), and
// adds its uid to the result under `children`.
import * as bosun from "bosun-operator";

// What the handlers create, so that `bosun rbac` gives the controller `create pods`.
bosun.owns("kopfexamples", "v1/pods");

bosun.on.create("kopfexamples", ({ spec }) => {
  // Render the pod with some spec fields used in the template.
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    spec: {
      containers: [{
        name: "the-only-one",
        image: "busybox",
        command: ["sh", "-x", "-c"],
        args: [`echo "FIELD=$FIELD"\nsleep ${spec.duration ?? 0}\n`],
        env: [{ name: "FIELD", value: spec.field ?? "default-value" }],
      }],
    },
  };

  // Make it our child: the controller assigns the namespace, name, labels and owner reference.
  bosun.own(pod, { copyLabels: true });
}, { id: "create_fn" });
