//! Kopf's 11-filtering-handlers: handlers called only for objects whose labels, annotations,
//! fields or changes match. Equality, presence and absence filters travel to the controller
//! (labels even to the API server as a label selector); callbacks and `when` predicates run
//! here, and a call whose predicate does not hold is answered "skipped".

use bosun_sdk::{Cause, HandlerError, Match, Operator};

const KOPFEXAMPLES: &str = "kopf.dev/v1/kopfexamples";

fn say_yes(value: Option<&str>, cause: &Cause) -> bool {
    value == Some("somevalue") && !cause.spec()["field"].is_null()
}

fn say_no(value: Option<&str>, cause: &Cause) -> bool {
    value == Some("somevalue") && cause.spec()["field"] == "not-this-value-for-sure"
}

/// A handler that logs one line: every handler here is one of these.
fn logs(line: &'static str) -> impl Fn(Cause) -> std::future::Ready<Result<(), HandlerError>> + Copy {
    move |cause: Cause| {
        cause.info(line);
        std::future::ready(Ok(()))
    }
}

/// Runs while `spec.field` is `value`: stopped when the field changes or the object goes.
async fn daemon_with_field(cause: Cause) -> Result<(), HandlerError> {
    while !cause.stopped().is_stopped() {
        cause.info("Field daemon is satisfied.");
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), cause.stopped().wait()).await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), bosun_sdk::ServeError> {
    Operator::new()
        .on_create(KOPFEXAMPLES, logs("Label is matching."))
        .id("create_with_labels_matching")
        .label("somelabel", "somevalue")
        .on_create(KOPFEXAMPLES, logs("Label is present."))
        .id("create_with_labels_present")
        .label("somelabel", Match::Present)
        .on_create(KOPFEXAMPLES, logs("Label is absent."))
        .id("create_with_labels_absent")
        .label("nonexistent", Match::Absent)
        .on_create(KOPFEXAMPLES, logs("Label callback matching."))
        .id("create_with_labels_callback_matching")
        .label_when("somelabel", say_yes)
        .on_create(KOPFEXAMPLES, logs("Annotation is matching."))
        .id("create_with_annotations_matching")
        .annotation("someannotation", "somevalue")
        .on_create(KOPFEXAMPLES, logs("Annotation is present."))
        .id("create_with_annotations_present")
        .annotation("someannotation", Match::Present)
        .on_create(KOPFEXAMPLES, logs("Annotation is absent."))
        .id("create_with_annotations_absent")
        .annotation("nonexistent", Match::Absent)
        .on_create(KOPFEXAMPLES, logs("Annotation callback mismatch."))
        .id("create_with_annotations_callback_matching")
        .annotation_when("someannotation", say_no)
        .on_create(KOPFEXAMPLES, logs("Filter satisfied."))
        .id("create_with_filter_satisfied")
        .when(|_| true)
        .on_create(KOPFEXAMPLES, logs("Filter not satisfied."))
        .id("create_with_filter_not_satisfied")
        .when(|_| false)
        .on_create(KOPFEXAMPLES, logs("Field value is satisfied."))
        .id("create_with_field_value_satisfied")
        .field("spec.field")
        .value("value")
        .on_create(KOPFEXAMPLES, logs("Field value is not satisfied."))
        .id("create_with_field_value_not_satisfied")
        .field("spec.field")
        .value("something-else")
        .on_create(KOPFEXAMPLES, logs("Field presence is satisfied."))
        .id("create_with_field_presence_satisfied")
        .field("spec.field")
        .value(Match::Present)
        .on_create(KOPFEXAMPLES, logs("Field presence is not satisfied."))
        .id("create_with_field_presence_not_satisfied")
        .field("spec.inexistent")
        .value(Match::Present)
        .on_update(KOPFEXAMPLES, logs("Field change is satisfied."))
        .id("update_with_field_change_satisfied")
        .field("spec.field")
        .old_value("value")
        .new_value("changed")
        .on_daemon(KOPFEXAMPLES, daemon_with_field)
        .field("spec.field")
        .value("value")
        .serve_default()
        .await
}
