//! Executing a plan's writes, as few requests as the changes allow, each landing only once
//! what it says is true: handlers' JSON patches and merge patches before the status write that
//! records their success, the diffbase (the cause handled) after it. A crash or a failure
//! between two leaves the handlers to be called again (calls are at-least-once), never a
//! success recorded whose patch was lost, nor a cause taken for handled whose results were lost.
//! And finding whose patch the API server refused, with dry runs that change nothing.

use serde_json::{Value, json};

use crate::cluster::discovery::ResolvedResource;
use crate::cluster::{self, Api, content};
use crate::object;
use crate::state::patches::compose;
use crate::state::plan::{CallOutcome, Writes};
use crate::state::storage::is_empty_patch;

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// 404: the object is gone.
    #[error("the object is gone")]
    Gone,
    /// 409: it changed meanwhile. With the newest body seen on the way, when a write before
    /// the conflict landed (the status patch) or the object was read again: the next cycle runs
    /// on it, not on the body from before those writes (whose handlers' results they hold).
    #[error("the object changed meanwhile")]
    Conflict(Option<Box<Value>>),
    /// 4xx: the patch is unacceptable.
    #[error("{0}")]
    Rejected(String),
    /// 5xx/network after retries.
    #[error("{0}")]
    Unavailable(String),
}

impl From<cluster::Error> for WriteError {
    fn from(e: cluster::Error) -> WriteError {
        match e.code() {
            Some(404) => WriteError::Gone,
            Some(409) => WriteError::Conflict(None),
            Some(c) if (400..500).contains(&c) && c != 429 => WriteError::Rejected(e.to_string()),
            _ => WriteError::Unavailable(e.to_string()),
        }
    }
}

/// The path on the API server of `body`, an object of `resource`.
pub fn path_of(resource: &ResolvedResource, body: &Value) -> String {
    resource.object_path(object::meta_str(body, "namespace"), object::meta_str(body, "name"))
}

/// Writes a cycle's patches to `body` at `path`, in the order that keeps what each write says
/// true should the next one fail: handlers' JSON patches first, then handlers' merge patches of
/// the main resource (`main`, with the finalizer if it is added), then the status patch
/// (results and progress: a handler's success lands only after its patches did), then the rest
/// of the main resource (`last`: the diffbase, which says the cause is handled, and a
/// finalizer's removal, after which the object may go). The finalizer change is guarded by the
/// resourceVersion of the body it is made against, read again on a conflict. A failure before
/// the status write leaves the handlers to be called again (at-least-once), never a success
/// recorded whose patch was lost. Returns the last written body.
#[tracing::instrument(name = "write", skip_all, fields(otel.kind = "client"))]
pub async fn write(api: &dyn Api, path: &str, finalizer: &str, body: &Value, w: &Writes) -> Result<Option<Value>, WriteError> {
    let mut written: Option<Value> = None;
    for (_, p) in &w.json_patches {
        let before = written.take().unwrap_or_else(|| body.clone());
        written = Some(json_patch(api, path, &before, p).await.map_err(|e| newest(e, &written))?);
    }
    let early = !is_empty_patch(&w.main);
    if early {
        main_write(api, path, finalizer, body, &w.main, w.finalizer.filter(|add| *add), &mut written).await?;
    }
    let late_finalizer = if early { w.finalizer.filter(|add| !*add) } else { w.finalizer };
    let late = !is_empty_patch(&w.last) || late_finalizer.is_some();
    if !is_empty_patch(&w.status) {
        let status_path = format!("{path}/status");
        // Its answer is read only when nothing is written after it, or when the finalizer
        // change is made against it: otherwise the later write's answer replaces it unread.
        if late && late_finalizer.is_none() {
            api.patch_unread(&status_path, content::MERGE, &w.status).await.map_err(|e| newest(e.into(), &written))?;
        } else {
            let answer = api.patch(&status_path, content::MERGE, &w.status).await.map_err(|e| newest(e.into(), &written))?;
            written = Some(answer);
        }
    }
    if late {
        main_write(api, path, finalizer, body, &w.last, late_finalizer, &mut written).await?;
    }
    Ok(written)
}

/// A conflict after earlier writes landed carries the newest body they returned.
fn newest(e: WriteError, written: &Option<Value>) -> WriteError {
    match e {
        WriteError::Conflict(None) => WriteError::Conflict(written.clone().map(Box::new)),
        other => other,
    }
}

/// A merge patch of the main resource with the change of `finalizer` (`Some(true)`: add it),
/// made against the newest body written (or `body`) and guarded by its resourceVersion, read
/// again on a conflict.
async fn main_write(
    api: &dyn Api,
    path: &str,
    finalizer: &str,
    body: &Value,
    patch: &Value,
    change: Option<bool>,
    written: &mut Option<Value>,
) -> Result<(), WriteError> {
    let mut current = std::borrow::Cow::Borrowed(written.as_ref().unwrap_or(body));
    for attempt in 0..3 {
        let mut main = patch.clone();
        if let Some(want) = change {
            let mut list: Vec<Value> = object::meta(&current, "finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
            list.retain(|f| f.as_str() != Some(finalizer));
            if want {
                list.push(Value::String(finalizer.to_string()));
            }
            compose(
                &mut main,
                &json!({"metadata": {"finalizers": list, "resourceVersion": object::meta_str(&current, "resourceVersion")}}),
            );
        }
        if is_empty_patch(&main) {
            return Ok(());
        }
        match api.patch(path, content::MERGE, &main).await {
            Ok(v) => {
                *written = Some(v);
                return Ok(());
            }
            Err(e) if e.code() == Some(409) && change.is_some() && attempt < 2 => {
                current = std::borrow::Cow::Owned(api.get(path).await?);
            }
            Err(e) if e.code() == Some(409) => {
                // The newest body seen: re-read after a conflict, or an earlier write's answer.
                let newest = match current {
                    std::borrow::Cow::Owned(read) => Some(read),
                    std::borrow::Cow::Borrowed(_) => written.take(),
                };
                return Err(WriteError::Conflict(newest.map(Box::new)));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Sends a handler's JSON patch so that it lands at most once. It is sent as it is; if its
/// answer is lost (or a 5xx says nothing of whether it landed), it is sent again only guarded by
/// a test of `before`'s resourceVersion, so that a second landing is refused; and if that is
/// refused (422), the object is read to see whether the first one landed: the patch applied to
/// `before` is what the object is now. Otherwise the object changed meanwhile: a conflict.
async fn json_patch(api: &dyn Api, path: &str, before: &Value, patch: &Value) -> Result<Value, WriteError> {
    let first = match api.patch(path, content::JSON_PATCH, patch).await {
        Ok(v) => return Ok(v),
        Err(e) if e.may_have_applied() => e,
        Err(e) => return Err(e.into()),
    };
    let Some(version) = object::version(before) else { return Err(first.into()) };
    let mut guarded = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": version})];
    guarded.extend(patch.as_array().into_iter().flatten().cloned());
    match api.patch(path, content::JSON_PATCH, &Value::Array(guarded)).await {
        Ok(v) => Ok(v),
        Err(e) if e.code() == Some(422) => {
            let now = api.get(path).await?;
            if landed(before, patch, &now) { Ok(now) } else { Err(WriteError::Conflict(Some(Box::new(now)))) }
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether `now` is `before` with `patch` applied, but for what the API server changes on
/// every write (resourceVersion, generation, managedFields).
fn landed(before: &Value, patch: &Value, now: &Value) -> bool {
    let Ok(ops) = serde_json::from_value::<json_patch::Patch>(patch.clone()) else { return false };
    let mut want = before.clone();
    if json_patch::patch(&mut want, &ops).is_err() {
        return false;
    }
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in ["resourceVersion", "generation", "managedFields"] {
                meta.remove(key);
            }
        }
        v
    };
    strip(&want) == strip(now)
}

/// The calls whose patches the API server refuses for the object at `path`, each tried alone
/// as a dry run.
pub async fn culprits(api: &dyn Api, path: &str, calls: &[CallOutcome]) -> Vec<String> {
    let mut out = Vec::new();
    for c in calls.iter().filter(|c| c.patches()) {
        let tries = [
            (c.main_patch.as_ref(), format!("{path}?dryRun=All"), content::MERGE),
            (c.status_patch.as_ref(), format!("{path}/status?dryRun=All"), content::MERGE),
            (c.json_patch.as_ref(), format!("{path}?dryRun=All"), content::JSON_PATCH),
        ];
        for (patch, at, kind) in tries {
            let Some(patch) = patch else { continue };
            if let Err(e) = api.patch(&at, kind, patch).await
                && matches!(WriteError::from(e), WriteError::Rejected(_))
            {
                out.push(c.id.clone());
                break;
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "writes_tests.rs"]
mod tests;
