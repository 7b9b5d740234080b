//! Strategies for property tests of the decoders of outside data: any JSON, and the
//! controller's own records (progress, diffbase, times) as anyone who may edit an object may
//! write them: plausible, half-plausible and garbage.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Strings that look like times, some of them at or past chrono's range.
pub fn time_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[+-]?[0-9]{4,6}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9](\\.[0-9]{1,9})?(Z|[+-][0-2][0-9]:[0-5][0-9])?",
        Just("+262143-12-31T23:59:59.999999".to_string()),
        Just("+262143-12-31T23:59:59.999999+00:00".to_string()),
        Just("-262143-01-01T00:00:00".to_string()),
        Just("9999-12-31T23:59:59.999999Z".to_string()),
        Just("0000-01-01T00:00:00Z".to_string()),
        ".{0,12}",
    ]
}

/// Object keys: a few that collide, any text besides.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-c]", 1 => ".{0,8}"]
}

/// A JSON scalar, the extremes included.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        Just(json!(u32::MAX)),
        Just(json!(-1)),
        ".{0,12}".prop_map(Value::String),
        time_text().prop_map(Value::String),
    ]
}

/// Any JSON value, up to 5 levels deep.
pub fn json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Sub-handler ids: a small alphabet of real-looking ids (so that records name each other,
/// in trees, cycles and repeats), and any text.
pub fn subref() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec!["p", "q", "p/a", "p/b", "p/a/x", "q/a", "p/a/x/y", ""]).prop_map(String::from),
        1 => ".{0,10}",
    ]
}

/// A progress record as JSON: each of Kopf's fields absent, plausible, or any JSON.
pub fn record() -> impl Strategy<Value = Value> {
    let field = |plausible: BoxedStrategy<Value>| prop_oneof![2 => Just(None), 3 => plausible.prop_map(Some), 1 => json().prop_map(Some)];
    let time = || time_text().prop_map(Value::String).boxed();
    (
        field(time()),
        field(time()),
        field(time()),
        field(prop::sample::select(vec!["create", "update", "delete", "resume", "x"]).prop_map(Value::from).boxed()),
        field(prop_oneof![0..5u32, Just(u32::MAX)].prop_map(Value::from).boxed()),
        (field(any::<bool>().prop_map(Value::Bool).boxed()), field(any::<bool>().prop_map(Value::Bool).boxed())),
        field(".{0,10}".prop_map(Value::String).boxed()),
        field(prop::collection::vec(subref(), 0..4).prop_map(|s| json!(s)).boxed()),
        field(json().boxed()),
    )
        .prop_map(|(started, stopped, delayed, purpose, retries, (success, failure), message, subrefs, param)| {
            let fields = [
                ("started", started),
                ("stopped", stopped),
                ("delayed", delayed),
                ("purpose", purpose),
                ("retries", retries),
                ("success", success),
                ("failure", failure),
                ("message", message),
                ("subrefs", subrefs),
                ("param", param),
            ];
            Value::Object(fields.into_iter().filter_map(|(k, v)| Some((k.to_string(), v?))).collect())
        })
}

/// Progress records by id, as they may be found on an object.
pub fn records() -> impl Strategy<Value = Value> {
    prop::collection::vec((subref(), prop_oneof![4 => record(), 1 => json()]), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>()))
}

/// A stored diffbase: an essence, a digest, or garbage.
pub fn diffbase() -> impl Strategy<Value = Value> {
    prop_oneof![
        json().prop_map(|v| Value::String(format!("{v}\n"))),
        "digest:[0-9a-f]{0,64}\n?".prop_map(Value::String),
        ".{0,16}".prop_map(Value::String),
        json(),
    ]
}

/// An object of the example resource with the controller's marks under `bosun.dev` and
/// Kopf's keys, in annotations (as text: JSON or not) and in status, each part plausible or not.
pub fn hostile_body() -> impl Strategy<Value = Value> {
    let annotation = prop_oneof![record().prop_map(|r| Value::String(r.to_string())), ".{0,12}".prop_map(Value::String), json()];
    let annotations = prop::collection::vec(
        (
            prop::sample::select(vec![
                "bosun.dev/p",
                "bosun.dev/q",
                "bosun.dev/p.a",
                "bosun.dev/p.a.x",
                "bosun.dev/last-handled-configuration",
                "kopf.zalando.org/p",
                "kopf.zalando.org/last-handled-configuration",
                "other/x",
            ]),
            prop_oneof![annotation, diffbase()],
        ),
        0..6,
    );
    let stanza = (prop_oneof![records(), json()], diffbase(), any::<bool>()).prop_map(|(progress, diffbase, with_base)| {
        let mut s = json!({"progress": progress});
        if with_base {
            s["last-handled-configuration"] = diffbase;
        }
        s
    });
    let finalizers = prop_oneof![Just(json!([])), Just(json!(["bosun.dev/finalizer"])), json()];
    (annotations, prop_oneof![4 => stanza, 1 => json()], finalizers, any::<bool>(), json(), any::<bool>()).prop_map(
        |(annotations, stanza, finalizers, deleting, spec, status_is_garbage)| {
            let annotations: Map<String, Value> = annotations.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let mut b = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                "metadata": {"name": "n", "namespace": "ns", "uid": "u1", "resourceVersion": "5",
                             "annotations": annotations, "finalizers": finalizers},
                "spec": spec, "status": {"bosun.dev": stanza, "kopf": {"progress": {}}}});
            if deleting {
                b["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            if status_is_garbage {
                b["status"] = json!("garbage");
            }
            b
        },
    )
}
