//! Printers of the workload kinds (apps/v1, batch/v1 CronJob) and PodDisruptionBudgets.

use serde_json::{Value, json};

use super::cells::{
    Row, age, age_col, col, containers, format_labels, format_selector, int, int_col, int_or_string, len, name, name_col, since,
    template_cols, text, wide,
};

pub(super) fn columns(plural: &str) -> Option<(Vec<Value>, Row)> {
    Some(match plural {
        "deployments" => deployments(),
        "statefulsets" => (
            [name_col(), text("Ready", "Number of the pod with ready state"), age_col()].into_iter().chain(template_cols()).collect(),
            |v| {
                let [names, images] = containers(v, "/spec/template/spec");
                vec![name(v), json!(format!("{}/{}", int(v, "/status/readyReplicas"), replicas(v))), age(v), names, images]
            },
        ),
        "daemonsets" => daemon_sets(),
        "replicasets" => replica_sets(),
        "cronjobs" => cron_jobs(),
        "poddisruptionbudgets" => (
            vec![
                name_col(),
                text("Min Available", "The minimum number of pods that must be available"),
                text("Max Unavailable", "The maximum number of pods that may be unavailable"),
                int_col("Allowed Disruptions", "Calculated number of pods that may be disrupted at this time"),
                age_col(),
            ],
            |v| {
                vec![
                    name(v),
                    json!(int_or_string(v.pointer("/spec/minAvailable"))),
                    json!(int_or_string(v.pointer("/spec/maxUnavailable"))),
                    json!(int(v, "/status/disruptionsAllowed")),
                    age(v),
                ]
            },
        ),
        _ => return None,
    })
}

/// `spec.replicas`, 1 when unset.
fn replicas(v: &Value) -> i64 {
    v.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)
}

fn deployments() -> (Vec<Value>, Row) {
    (
        vec![
            name_col(),
            text("Ready", "Number of the pod with ready state"),
            text("Up-to-date", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
            text("Available", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
            age_col(),
        ],
        |v| {
            vec![
                name(v),
                json!(format!("{}/{}", int(v, "/status/readyReplicas"), replicas(v))),
                json!(int(v, "/status/updatedReplicas")),
                json!(int(v, "/status/availableReplicas")),
                age(v),
            ]
        },
    )
}

fn daemon_sets() -> (Vec<Value>, Row) {
    let [containers_col, images_col] = template_cols();
    (
        vec![
            name_col(),
            int_col(
                "Desired",
                "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
            ),
            int_col(
                "Current",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
            ),
            int_col(
                "Ready",
                "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
            ),
            int_col("Up-to-date", "The total number of nodes that are running updated daemon pod"),
            int_col(
                "Available",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
            ),
            text(
                "Node Selector",
                "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
            ),
            age_col(),
            containers_col,
            images_col,
            wide(
                "Selector",
                "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            ),
        ],
        |v| {
            let [names, images] = containers(v, "/spec/template/spec");
            vec![
                name(v),
                json!(int(v, "/status/desiredNumberScheduled")),
                json!(int(v, "/status/currentNumberScheduled")),
                json!(int(v, "/status/numberReady")),
                json!(int(v, "/status/updatedNumberScheduled")),
                json!(int(v, "/status/numberAvailable")),
                json!(format_labels(v.pointer("/spec/template/spec/nodeSelector"))),
                age(v),
                names,
                images,
                json!(format_selector(v.pointer("/spec/selector"))),
            ]
        },
    )
}

fn replica_sets() -> (Vec<Value>, Row) {
    let [containers_col, images_col] = template_cols();
    (
        vec![
            name_col(),
            int_col(
                "Desired",
                "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
            ),
            int_col(
                "Current",
                "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
            ),
            int_col("Ready", "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition."),
            age_col(),
            containers_col,
            images_col,
            wide(
                "Selector",
                "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            ),
        ],
        |v| {
            let [names, images] = containers(v, "/spec/template/spec");
            vec![
                name(v),
                json!(replicas(v)),
                json!(int(v, "/status/replicas")),
                json!(int(v, "/status/readyReplicas")),
                age(v),
                names,
                images,
                json!(format_selector(v.pointer("/spec/selector"))),
            ]
        },
    )
}

fn cron_jobs() -> (Vec<Value>, Row) {
    let [containers_col, images_col] = template_cols();
    (
        vec![
            name_col(),
            text("Schedule", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
            text(
                "Timezone",
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
            ),
            col(
                "Suspend",
                "boolean",
                "",
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
                0,
            ),
            int_col("Active", "A list of pointers to currently running jobs."),
            text("Last Schedule", "Information when was the last time the job was successfully scheduled."),
            age_col(),
            containers_col,
            images_col,
            wide(
                "Selector",
                "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            ),
        ],
        |v| {
            let suspend = match v.pointer("/spec/suspend").and_then(Value::as_bool) {
                Some(true) => "True",
                Some(false) => "False",
                None => "<unset>",
            };
            let last = match v.pointer("/status/lastScheduleTime").and_then(Value::as_str) {
                Some(t) => since(Some(t)),
                None => "<none>".into(),
            };
            let template = "/spec/jobTemplate/spec/template/spec";
            let [names, images] = containers(v, template);
            vec![
                name(v),
                json!(super::cells::s(v, "/spec/schedule")),
                json!(super::cells::or_none(super::cells::s(v, "/spec/timeZone"))),
                json!(suspend),
                json!(len(v, "/status/active")),
                json!(last),
                age(v),
                names,
                images,
                json!(format_selector(v.pointer("/spec/jobTemplate/spec/selector"))),
            ]
        },
    )
}
