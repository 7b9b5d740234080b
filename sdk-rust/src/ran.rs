//! [`Ran`]: how one run of a handler function ended, as `run` in `dispatch.rs` makes it of
//! the function's result, error or panic. A plain value, so that the index (`index.rs`) can
//! apply it without knowing how handlers are run.

use bosun_proto::v1 as pb;

/// How one run of a handler function ended.
pub(crate) struct Ran {
    pub(crate) outcome: pb::Outcome,
    pub(crate) message: String,
    pub(crate) delay_seconds: Option<f64>,
    /// The result as JSON; empty when `null`.
    pub(crate) result: Vec<u8>,
    /// For admission handlers: the denial's HTTP code (0: unset).
    pub(crate) code: i32,
}
