//! PUT and PATCH: replace or patch an object (main resource or `/status`); server-side apply
//! is handed to `apply.rs`. All three end in the one read-modify-write of `commit.rs`
//! (preconditions, generation rules, no-op detection, finalizer rules for terminating
//! objects, removal once the last finalizer is gone).

use serde_json::Value;

use super::commit::{Fields, commit};
use super::common::{check_patched_shape, check_shape, check_type, prune_unknown};
use super::types::{Object, Reply, WriteOpts};
use crate::cluster::Cluster;
use crate::patch::{self, Format};
use crate::status::{ApiError, ApiResult, Cause};
use crate::{apply, builtin};

/// The patch format of a PATCH request.
pub type PatchKind = Format;

/// PUT: replace the object `at` with `body`.
pub fn update(cluster: &Cluster, at: Object<'_>, mut body: Value, opts: &WriteOpts) -> ApiResult<Reply> {
    let Object { info, ns, name, sub } = at;
    check_type(info, &mut body)?;
    check_shape(info, &body)?;
    if info.is_events_v1() {
        // Pruned in the group's shape; the commit's `reconcile` sees the stored core shape.
        prune_unknown(info, &mut body, opts.validation)?;
        body = builtin::event_v1_to_core(body);
    }
    let rv_missing = body.get("metadata").and_then(|v| v.get("resourceVersion")).and_then(Value::as_str).is_none_or(str::is_empty);
    let builtin = info.builtin;
    commit(cluster, Object { info, ns, name, sub }, opts, Fields::Recorded, move |_| {
        if rv_missing && !builtin {
            let causes =
                vec![Cause::new("FieldValueInvalid", "Invalid value: 0: must be specified for an update", "metadata.resourceVersion")];
            return Err(ApiError::invalid(&info.qualified(), &info.group, &info.plural, name, causes));
        }
        Ok(body.clone())
    })
}

/// PATCH: apply a patch of `format` to the object `at`.
pub fn patch(cluster: &Cluster, at: Object<'_>, format: Format, raw: &[u8], opts: &WriteOpts) -> ApiResult<Reply> {
    let Object { info, ns, name, sub } = at;
    if format == Format::Strategic && !info.builtin {
        return Err(ApiError::unsupported_media_type());
    }
    let parsed = patch::parse(format, raw)?;
    if format == Format::Apply {
        return apply::apply(cluster, info, ns, name, sub, parsed, opts);
    }
    let events_v1 = info.is_events_v1();
    commit(cluster, Object { info, ns, name, sub }, opts, Fields::Recorded, move |current| {
        let mut target = if events_v1 { builtin::event_from_core(current) } else { current.clone() };
        patch::apply(format, &mut target, &parsed)?;
        check_patched_shape(info, &target)?;
        if events_v1 {
            check_type(info, &mut target)?;
            prune_unknown(info, &mut target, opts.validation)?;
            target = builtin::event_v1_to_core(target);
        }
        Ok(target)
    })
}
