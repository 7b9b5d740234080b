//! The writing phase of a cycle: the main-resource merge patch (with the finalizer change,
//! guarded by the resourceVersion and re-read on 409), then the status merge patch, then
//! handlers' JSON patches — as few requests as the changes allow.

use serde_json::{Value, json};

use super::cycle::{ResourceContext, meta_str};
use super::patches::compose;
use crate::cluster::{self, content};
use crate::state::storage::is_empty_patch;

impl ResourceContext {
    /// Writes the main patch (with the finalizer change, guarded by the resourceVersion),
    /// then the status patch, then handlers' JSON patches. Returns the last written body.
    pub(super) async fn write(
        &self,
        body: &Value,
        main: Value,
        status: Value,
        finalizer: Option<bool>,
        json_patches: &[(&str, &Value)],
    ) -> Result<Option<Value>, WriteError> {
        let ns = meta_str(body, "namespace");
        let name = meta_str(body, "name");
        let path = self.resource.object_path(ns, name);
        let mut written = None;
        let mut current = body.clone();
        for attempt in 0..3 {
            let mut main_now = main.clone();
            if let Some(want) = finalizer {
                let mut list: Vec<Value> = current.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
                list.retain(|f| f.as_str() != Some(self.storage.finalizer.as_str()));
                if want {
                    list.push(Value::String(self.storage.finalizer.clone()));
                }
                compose(
                    &mut main_now,
                    &json!({"metadata": {"finalizers": list, "resourceVersion": meta_str(&current, "resourceVersion")}}),
                );
            }
            if is_empty_patch(&main_now) {
                break;
            }
            match self.cluster.patch(&path, content::MERGE, &main_now).await {
                Ok(v) => {
                    written = Some(v);
                    break;
                }
                Err(e) if e.code() == Some(409) && finalizer.is_some() && attempt < 2 => {
                    current = self.cluster.get(&path).await.map_err(WriteError::from)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        if !is_empty_patch(&status) {
            let status_path = format!("{path}/status");
            written = Some(self.cluster.patch(&status_path, content::MERGE, &status).await?);
        }
        for (_, p) in json_patches {
            written = Some(self.cluster.patch(&path, content::JSON_PATCH, p).await?);
        }
        Ok(written)
    }
}

/// Why a write did not happen.
#[derive(Debug)]
pub(super) enum WriteError {
    /// 404: the object is gone.
    Gone,
    /// 409: it changed meanwhile.
    Conflict,
    /// 4xx: the patch is unacceptable.
    Rejected(String),
    /// 5xx/network after retries.
    Unavailable(String),
}

impl From<cluster::Error> for WriteError {
    fn from(e: cluster::Error) -> WriteError {
        match e.code() {
            Some(404) => WriteError::Gone,
            Some(409) => WriteError::Conflict,
            Some(c) if (400..500).contains(&c) && c != 429 => WriteError::Rejected(e.to_string()),
            _ => WriteError::Unavailable(e.to_string()),
        }
    }
}
