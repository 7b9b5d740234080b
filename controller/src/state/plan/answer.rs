//! A handler's answer, checked before anything of it is used: its result, patches and
//! sub-handlers must be what the contract says, or the answer is the handler's unexpected error.

use bosun_proto::v1 as pb;
use serde_json::Value;

use crate::state::patches::check_merge_patch;
use crate::state::registry::check_id;

/// Why a handler's answer cannot be used (the handler's unexpected error).
#[derive(Debug, thiserror::Error)]
pub(super) enum Unusable {
    #[error("the handler server returned invalid JSON in `{field}`: {error}")]
    NotJson { field: &'static str, error: crate::json::Error },
    #[error("the handler server returned an unusable `merge_patch`: {0}")]
    MergePatch(#[from] crate::state::patches::UnusablePatch),
    #[error("the handler server returned an invalid `json_patch`: {0}")]
    JsonPatch(serde_json::Error),
    #[error("sub-handler id '{id}' is not valid: {why}")]
    SubhandlerId { id: String, why: crate::state::registry::BadId },
    #[error("sub-handler id '{0}' is given twice")]
    SubhandlerTwice(String),
    #[error("{0} sub-handlers are more than the {max} a handler may have", max = super::calls::MAX_RECORDS)]
    TooManySubhandlers(usize),
}

fn parse_bytes(bytes: &[u8], field: &'static str) -> Result<Option<Value>, Unusable> {
    if bytes.is_empty() {
        return Ok(None);
    }
    crate::json::from_slice(bytes).map(|v| Some(v).filter(|v| !v.is_null())).map_err(|error| Unusable::NotJson { field, error })
}

/// A handler's answer, checked: result, merge patch, JSON patch and sub-handlers.
pub(super) struct Checked {
    pub(super) result: Option<Value>,
    pub(super) merge: Option<Value>,
    pub(super) json_patch: Option<Value>,
    pub(super) children: Vec<(String, Option<Value>)>,
}

pub(super) fn check(answer: &pb::HandleResponse, id: &str) -> Result<Checked, Unusable> {
    let result = parse_bytes(&answer.result, "result")?;
    let merge = parse_bytes(&answer.merge_patch, "merge_patch")?;
    if let Some(m) = &merge {
        check_merge_patch(m)?;
    }
    let json_patch = parse_bytes(&answer.json_patch, "json_patch")?;
    if let Some(p) = &json_patch {
        serde_json::from_value::<json_patch::Patch>(p.clone()).map_err(Unusable::JsonPatch)?;
    }
    if answer.subhandlers.len() > super::calls::MAX_RECORDS {
        return Err(Unusable::TooManySubhandlers(answer.subhandlers.len()));
    }
    let mut children = Vec::new();
    let mut given = std::collections::HashSet::new();
    for c in &answer.subhandlers {
        let full = format!("{id}/{}", c.id);
        check_id(&c.id).map_err(|why| Unusable::SubhandlerId { id: c.id.clone(), why })?;
        if !given.insert(c.id.as_str()) {
            return Err(Unusable::SubhandlerTwice(c.id.clone()));
        }
        let param = parse_bytes(&c.param, "subhandlers.param")?;
        children.push((full, param));
    }
    Ok(Checked { result, merge, json_patch, children })
}
