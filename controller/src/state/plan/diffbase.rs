//! The last handled configuration (the diffbase) as stored: the essence itself, or, where it
//! is too large for where the state lives, its digest, so that changes are still seen.

use bosun_proto::v1 as pb;
use serde_json::Value;

use super::types::{Cycle, Subject};
use crate::logs::Level;
use crate::state::essence::{decode_diffbase, encode_diffbase};
use crate::state::storage::{ANNOTATIONS_LIMIT, StorageKind};

/// A diffbase larger than this is stored as a digest when it is kept in status (the
/// API server refuses requests over 3 MiB and etcd objects over 1.5 MiB).
pub const STATUS_DIFFBASE_LIMIT: usize = 512 * 1024;

/// The prefix of a diffbase stored as a digest of the essence.
pub(super) const DIGEST: &str = "digest:";

/// The stored form of an essence too large to store: a digest, so changes are still seen.
pub fn digest_diffbase(essence: &Value) -> String {
    use blake2::digest::{Update, VariableOutput};
    let mut hasher = blake2::Blake2bVar::new(32).expect("32 is a valid blake2b size");
    hasher.update(&serde_json::to_vec(essence).expect("JSON values serialize"));
    let mut out = [0u8; 32];
    hasher.finalize_variable(&mut out).expect("buffer has the digest size");
    let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
    format!("{DIGEST}{hex}\n")
}

/// What a stored diffbase says.
pub(super) enum Stored {
    Nothing,
    Essence(Value),
    Digest(String),
}

pub(super) fn stored_base(text: Option<&str>) -> Stored {
    match text {
        None => Stored::Nothing,
        Some(t) if t.starts_with(DIGEST) => Stored::Digest(t.to_string()),
        Some(t) => decode_diffbase(t).map_or(Stored::Nothing, Stored::Essence),
    }
}

impl Cycle {
    /// The essence as it will be stored: the essence itself, or its digest when it is too large
    /// for where the state lives (with a Warning event the first time).
    pub(super) fn diffbase_to_store(&mut self, subject: &Subject, body: &Value, events: &mut Vec<pb::Event>) -> String {
        let text = encode_diffbase(&self.new_essence);
        let too_large = match subject.storage.diffbase_kind {
            StorageKind::Status => text.len() > STATUS_DIFFBASE_LIMIT,
            StorageKind::Annotations => subject.storage.diffbase_fits(body, &text).is_err(),
        };
        if !too_large {
            return text;
        }
        let limit = match subject.storage.diffbase_kind {
            StorageKind::Status => STATUS_DIFFBASE_LIMIT,
            StorageKind::Annotations => ANNOTATIONS_LIMIT,
        };
        let digest = digest_diffbase(&self.new_essence);
        if !self.stored.diffbase.as_deref().is_some_and(|d| d.starts_with(DIGEST)) {
            let line = format!(
                "The last handled state is too large to store ({} bytes; the limit is {limit} bytes), so only its digest is stored: \
                 changes are still detected, but update handlers get no diff and no old values. Leave large fields out with \
                 ignored_fields to keep the diff.",
                text.len()
            );
            self.line(Level::Warn, line.clone());
            events.push(pb::Event { r#type: "Warning".into(), reason: "DiffbaseTooLarge".into(), message: line, regarding: None });
        }
        digest
    }
}
