//! Property tests: the decoders of what the controller stores on objects, and the whole plan
//! protocol (`begin` → `next_call` → `absorb` → `conclude`), over hostile stored state and
//! hostile answers. Nothing panics, every cycle ends within a bound, and what a cycle writes
//! can be read by the next one.

use std::sync::Arc;

use bosun_proto::v1 as pb;
use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::arbitrary::{self, hostile_body, json, record, subref, time_text};
use super::essence::{EssenceRules, decode_diffbase};
use super::inspect::explain;
use super::plan::{Start, Subject, begin};
use super::progress::{ProgressRecord, format_time, parse_time};
use super::registry::Handler;
use super::storage::{ObjectState, Storage, StorageKind};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

/// The storages a controller may use: Bosun's in status and in annotations, and Kopf's.
fn storages() -> [Storage; 3] {
    [Storage::bosun("bosun.dev", StorageKind::Status), Storage::bosun("bosun.dev", StorageKind::Annotations), Storage::kopf()]
}

fn handler(id: &str, kind: pb::HandlerKind, finishes_parents: bool, retries: Option<u32>) -> Arc<Handler> {
    let spec = pb::HandlerSpec {
        id: id.into(),
        kind: kind as i32,
        resource: Some(pb::ResourceSelector { name: "kex".into(), ..Default::default() }),
        ..Default::default()
    };
    let h = Handler::from_spec(&spec, 0).unwrap();
    Arc::new(Handler { finishes_parents, retries, ..h })
}

/// Bytes a handler server may send where JSON is expected.
fn json_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        json().prop_map(|v| v.to_string().into_bytes()),
        arbitrary::records().prop_map(|v| json!({"status": v, "metadata": {"annotations": {"bosun.dev/p": "x"}}}).to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..16),
        Just(crate::json::nested(crate::json::MAX_DEPTH + 1).into_bytes()),
    ]
}

/// Any answer a handler server may give, the absurd ones included.
fn answer() -> impl Strategy<Value = pb::HandleResponse> {
    let delay = prop_oneof![
        Just(None),
        any::<f64>().prop_map(Some),
        prop::sample::select(vec![f64::NAN, f64::INFINITY, -1.0, 1e300, 0.0, 5.0]).prop_map(Some),
    ];
    let subhandlers =
        prop::collection::vec((subref(), json_bytes()).prop_map(|(id, param)| pb::SubHandler { id, param, options: None }), 0..4);
    let events = prop::collection::vec(
        (".{0,8}", ".{0,8}", ".{0,20}").prop_map(|(r#type, reason, message)| pb::Event { r#type, reason, message, regarding: None }),
        0..2,
    );
    let logs = prop::collection::vec((-2..6i32, ".{0,20}").prop_map(|(level, message)| pb::LogLine { level, message }), 0..2);
    (-1..7i32, ".{0,12}", delay, json_bytes(), json_bytes(), json_bytes(), subhandlers, events, logs).prop_map(
        |(outcome, message, delay_seconds, result, merge_patch, json_patch, subhandlers, events, logs)| pb::HandleResponse {
            outcome,
            message,
            delay_seconds,
            result,
            merge_patch,
            json_patch,
            subhandlers,
            events,
            logs,
            ..Default::default()
        },
    )
}

/// One cycle of the plan over `body`, each call answered by the next of `answers` (or
/// successfully when they run out); returns the body after its writes, if it handled.
fn cycle(subject: &Subject, body: &Value, answers: &[pb::HandleResponse], first_sight: bool) -> Option<Value> {
    let mut cycle = match begin(subject, body, None, first_sight, now()) {
        Start::Idle(_) => return None,
        Start::AddFinalizer(w, _) => {
            assert_eq!(w.finalizer, Some(true));
            return None;
        }
        Start::Handle(c) => c,
    };
    let mut calls = 0;
    while let Some(inv) = cycle.next_call() {
        calls += 1;
        // Each (sub-)handler is called once a cycle, and a cycle reads at most MAX_RECORDS.
        assert!(calls <= 2 * super::plan::MAX_RECORDS + 64, "a cycle that does not end");
        let reply = answers.get(calls - 1).cloned().unwrap_or(pb::HandleResponse { outcome: 0, ..Default::default() });
        cycle.absorb(subject, body, &inv, Ok(reply));
    }
    if calls % 3 == 1 {
        let culprits: Vec<String> = cycle.calls().iter().map(|c| c.id.clone()).take(1).collect();
        cycle.reject(&culprits, "refused");
    }
    let (writes, _next) = cycle.conclude(subject, body, None);
    let mut after = body.clone();
    json_patch::merge(&mut after, &writes.main);
    json_patch::merge(&mut after, &writes.status);
    Some(after)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn progress_records_decode_any_text_and_what_they_encode_decodes_back(text in ".{0,40}", r in record()) {
        let _ = ProgressRecord::decode(&text);
        if let Some(decoded) = ProgressRecord::decode(&r.to_string()) {
            let _ = (decoded.finished(), decoded.delayed_until(), decoded.started_at());
            prop_assert_eq!(ProgressRecord::decode(&decoded.encode()), Some(decoded));
        }
    }

    #[test]
    fn times_parse_or_not_and_what_is_formatted_parses_back(text in time_text()) {
        // Times are written to the microsecond.
        if let Some(t) = parse_time(&text) {
            let written = format_time(t);
            prop_assert_eq!(parse_time(&written).map(format_time), Some(written));
        }
    }

    #[test]
    fn a_diffbase_decodes_or_not(text in ".{0,40}", v in json()) {
        let _ = decode_diffbase(&text);
        prop_assert_eq!(decode_diffbase(&format!("{v}\n")), Some(v));
    }

    #[test]
    fn storage_reads_and_patches_any_object(body in hostile_body(), ids in prop::collection::vec(subref(), 0..4), desired in arbitrary::records()) {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        for storage in storages() {
            let recorded = storage.recorded_ids(&body);
            let state = storage.read(&body, recorded.iter().map(String::as_str).chain(ids.iter().copied()));
            let _ = storage.has_finalizer(&body);
            let _ = storage.diffbase_fits(&body, "{}");
            let progress = desired.as_object().into_iter().flatten()
                .filter_map(|(k, v)| Some((k.clone(), serde_json::from_value::<ProgressRecord>(v.clone()).ok()?)))
                .collect();
            let wanted = ObjectState { diffbase: state.diffbase.clone().filter(|_| ids.len().is_multiple_of(2)), progress };
            let all: Vec<&str> = recorded.iter().map(String::as_str).chain(ids.iter().copied()).chain(wanted.progress.keys().map(String::as_str)).collect();
            let (mut main, mut status) = (json!({"status": "x"}), json!({}));
            storage.patch(&body, &wanted, &all, &mut main, &mut status);
            // What was written reads back.
            let mut after = body.clone();
            json_patch::merge(&mut after, &main);
            json_patch::merge(&mut after, &status);
            let _ = explain(&after, &storage, now());
        }
    }

    #[test]
    fn inspect_explains_any_object(body in hostile_body()) {
        for storage in storages() {
            let _ = explain(&body, &storage, now());
        }
    }

    #[test]
    fn cycles_over_hostile_state_and_answers_end_and_the_next_cycle_reads_what_they_wrote(
        body in hostile_body(),
        answers in prop::collection::vec(answer(), 0..8),
        finishes_parents in any::<bool>(),
        first_sight in any::<bool>(),
        retries in prop_oneof![Just(None), (0..3u32).prop_map(Some)],
    ) {
        let handlers = vec![
            handler("p", pb::HandlerKind::Create, finishes_parents, retries),
            handler("q", pb::HandlerKind::Update, finishes_parents, retries),
            handler("p", pb::HandlerKind::Resume, finishes_parents, retries),
            handler("d", pb::HandlerKind::Delete, finishes_parents, retries),
        ];
        let rules = EssenceRules { own_prefixes: vec!["bosun.dev/".into(), "kopf.zalando.org/".into()], ..Default::default() };
        for storage in storages() {
            for (has_status, status_keeps_unknown) in [(true, true), (false, false)] {
                let subject = Subject { handlers: &handlers, storage: &storage, rules: &rules, has_status, status_keeps_unknown };
                let mut b = body.clone();
                for _ in 0..3 {
                    match cycle(&subject, &b, &answers, first_sight) {
                        Some(next) => b = next,
                        None => break,
                    }
                }
            }
        }
    }
}

/// An AdmissionReview as an API server (or anyone who reaches the endpoint) may send it.
fn review() -> impl Strategy<Value = Value> {
    let op = prop_oneof![prop::sample::select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT"]).prop_map(Value::from), json()];
    let resource = prop_oneof![Just(json!({"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"})), json()];
    let object = prop_oneof![Just(json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {}})), json()];
    (op, resource, object.clone(), object, prop_oneof![Just(json!("")), Just(json!("status")), json()], json(), any::<bool>()).prop_map(
        |(operation, resource, object, old, sub, dry_run, garbage)| {
            if garbage {
                return json!({"request": {"uid": dry_run, "resource": resource}});
            }
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "operation": operation,
                "resource": resource, "subResource": sub, "object": object, "oldObject": old, "dryRun": dry_run}})
        },
    )
}

/// A handler's answer to a review, absurd ones included.
fn admit() -> impl Strategy<Value = super::admission::Answer> {
    let said = (any::<bool>(), ".{0,8}", any::<i32>(), json_bytes(), prop::collection::vec(".{0,8}", 0..2)).prop_map(
        |(allowed, message, code, merge_patch, warnings)| {
            super::admission::Answer::Said(pb::AdmitResponse { allowed, message, code, merge_patch, warnings })
        },
    );
    prop_oneof![4 => said, 1 => ".{0,8}".prop_map(super::admission::Answer::Failed)]
}

proptest! {
    #[test]
    fn admission_reviews_are_read_or_refused_and_any_answers_make_one_response(
        review in review(),
        answers in prop::collection::vec((admit(), any::<bool>(), any::<bool>()), 0..4),
    ) {
        use base64::Engine as _;
        let Ok(req) = super::admission::Request::parse(&review) else { return Ok(()) };
        let handlers: Vec<Handler> = answers.iter().enumerate().map(|(i, (_, mutating, fail_closed))| {
            let kind = if *mutating { pb::HandlerKind::Mutate } else { pb::HandlerKind::Validate };
            let h = handler(&format!("h{i}"), kind, false, None);
            let mut h = (*h).clone();
            h.admission.fail_closed = *fail_closed;
            h
        }).collect();
        for h in &handlers {
            let _ = super::admission::reviews(h, ("kopf.dev", "v1", "kopfexamples"), h.kind == pb::HandlerKind::Mutate, &req);
        }
        let given: Vec<(&Handler, super::admission::Answer)> = handlers.iter().zip(answers.iter().map(|(a, _, _)| a.clone())).collect();
        let response = super::admission::respond(&review, &req, &given);
        prop_assert!(response["response"]["allowed"].is_boolean());
        if let Some(patch) = response["response"]["patch"].as_str() {
            let ops: json_patch::Patch = serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).unwrap()).unwrap();
            let mut object = req.object.clone().unwrap();
            prop_assert!(json_patch::patch(&mut object, &ops).is_ok());
        }
    }
}
