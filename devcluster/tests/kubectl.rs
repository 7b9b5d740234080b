//! The user-facing verbs with the real `kubectl` binary: apply a CRD and an object, get it
//! as a table and as YAML, label/annotate/patch it, and delete it while it has a finalizer.
//! Without `kubectl` on the PATH they fail under CI and are skipped, with a message, elsewhere.

#[path = "support/kubectl.rs"]
mod support;

use support::{kubectl, kubectl_ok, with_kubectl};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: kopfexamples.kopf.dev}
spec:
  scope: Namespaced
  group: kopf.dev
  names: {kind: KopfExample, plural: kopfexamples, singular: kopfexample, shortNames: [kex]}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
      additionalPrinterColumns:
        - {name: Duration, type: string, jsonPath: .spec.duration}
"#;

const OBJ: &str = r#"
apiVersion: kopf.dev/v1
kind: KopfExample
metadata: {name: kex1, finalizers: [example.com/hold]}
spec: {duration: 1m}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_gets_labels_patches_and_deletes_a_custom_resource() {
    with_kubectl(move |kc| {
        let run = |args: &[&str], stdin: Option<&str>| kubectl_ok(kc, args, stdin);
        assert!(run(&["apply", "-f", "-"], Some(CRD)).contains("created"));
        assert!(run(&["apply", "-f", "-"], Some(OBJ)).contains("kopfexample.kopf.dev/kex1 created"));
        let table = run(&["get", "kex"], None);
        assert!(table.contains("DURATION") && table.contains("kex1") && table.contains("1m"), "{table}");
        let yaml = run(&["get", "kopfexamples", "kex1", "-o", "yaml"], None);
        assert!(yaml.contains("uid:") && yaml.contains("resourceVersion:"), "{yaml}");
        run(&["label", "kex", "kex1", "color=red"], None);
        run(&["annotate", "kex", "kex1", "note=hi"], None);
        run(&["patch", "kex", "kex1", "--type", "merge", "-p", r#"{"spec":{"duration":"2m"}}"#], None);
        let labels =
            run(&["get", "kex", "kex1", "-o", "jsonpath={.metadata.labels.color} {.metadata.annotations.note} {.spec.duration}"], None);
        assert_eq!(labels.trim(), "red hi 2m");
        run(&["delete", "kex", "kex1", "--wait=false"], None);
        let ts = run(&["get", "kex", "kex1", "-o", "jsonpath={.metadata.deletionTimestamp}"], None);
        assert!(!ts.trim().is_empty(), "the object stays with a deletionTimestamp");
        run(&["patch", "kex", "kex1", "--type", "json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#], None);
        let (ok, out) = kubectl(kc, &["get", "kex", "kex1"], None);
        assert!(!ok && out.contains("NotFound"), "{out}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_commands_send_protobuf_and_are_understood() {
    with_kubectl(move |kc| {
        let run = |args: &[&str]| kubectl_ok(kc, args, None);
        run(&["create", "namespace", "team"]);
        run(&["-n", "team", "create", "configmap", "c1", "--from-literal=x=y"]);
        run(&["-n", "team", "create", "secret", "generic", "s1", "--from-literal=a=b"]);
        run(&["-n", "team", "create", "deployment", "d1", "--image=nginx:1.25"]);
        run(&["-n", "team", "scale", "deployment", "d1", "--replicas=3"]);
        let out =
            run(&["-n", "team", "get", "deployment", "d1", "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}"]);
        assert_eq!(out.trim(), "3 nginx:1.25");
        assert_eq!(run(&["-n", "team", "get", "secret", "s1", "-o", "jsonpath={.data.a}"]).trim(), "Yg==");
        assert_eq!(run(&["-n", "team", "get", "configmap", "c1", "-o", "jsonpath={.data.x}"]).trim(), "y");
    })
    .await;
}
