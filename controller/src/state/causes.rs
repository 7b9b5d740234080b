//! Cause detection: why an object is worth the handlers' attention right now.
//!
//! A pure function of what was seen (event type, deletion, finalizer, diffbase, diff, first
//! sight), in Kopf's order: GONE, FREE, DELETE, CREATE, RESUME, NOOP, UPDATE.

/// The reason of a changing cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The object was seen for the first time without a diffbase.
    Create,
    /// The essence changed since it was last handled.
    Update,
    /// The object is being deleted and still holds our finalizer.
    Delete,
    /// First sight of an already handled, unchanged object by this process.
    Resume,
    /// Nothing to do.
    Noop,
    /// Being deleted and our finalizer is not on it: nothing to do, nothing to block.
    Free,
    /// The object is gone from the API server.
    Gone,
}

impl Reason {
    /// The word used in progress records' `purpose` and in Kopf's logs.
    pub fn purpose(self) -> &'static str {
        match self {
            Reason::Create => "create",
            Reason::Update => "update",
            Reason::Delete => "delete",
            Reason::Resume => "resume",
            Reason::Noop => "noop",
            Reason::Free => "free",
            Reason::Gone => "gone",
        }
    }

    /// The title in `<Title> is processed: ...` log lines.
    pub fn title(self) -> &'static str {
        match self {
            Reason::Create => "Creation",
            Reason::Update => "Updating",
            Reason::Delete => "Deletion",
            Reason::Resume => "Resuming",
            Reason::Noop => "Nothing",
            Reason::Free => "Freeing",
            Reason::Gone => "Disappearance",
        }
    }

    /// Whether handlers of this reason change the diffbase when they finish.
    pub fn stores_diffbase(self) -> bool {
        matches!(self, Reason::Create | Reason::Update | Reason::Resume)
    }
}

/// What cause detection looks at.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observation {
    /// The watch said DELETED.
    pub deleted_event: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deletion_requested: bool,
    /// Our finalizer is on the object.
    pub has_finalizer: bool,
    /// A diffbase is stored on the object.
    pub has_diffbase: bool,
    /// The essence differs from the stored diffbase.
    pub changed: bool,
    /// This process has not seen the object before.
    pub first_sight: bool,
}

/// Detects the cause of an observation.
pub fn detect(o: Observation) -> Reason {
    if o.deleted_event {
        Reason::Gone
    } else if o.deletion_requested && !o.has_finalizer {
        Reason::Free
    } else if o.deletion_requested {
        Reason::Delete
    } else if !o.has_diffbase {
        Reason::Create
    } else if !o.changed && o.first_sight {
        Reason::Resume
    } else if !o.changed {
        Reason::Noop
    } else {
        Reason::Update
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_crosses_event_deletion_finalizer_diffbase_and_sight() {
        // (deleted_event, deletion_requested, has_finalizer, has_diffbase, changed, first_sight) → reason
        let table = [
            ((true, false, false, false, false, false), Reason::Gone),
            ((true, true, true, true, true, true), Reason::Gone),
            ((false, true, false, false, false, false), Reason::Free),
            ((false, true, false, true, true, true), Reason::Free),
            ((false, true, true, false, false, false), Reason::Delete),
            ((false, true, true, true, true, true), Reason::Delete),
            ((false, false, false, false, false, false), Reason::Create),
            ((false, false, true, false, true, true), Reason::Create),
            ((false, false, false, true, false, true), Reason::Resume),
            ((false, false, true, true, false, true), Reason::Resume),
            ((false, false, false, true, false, false), Reason::Noop),
            ((false, false, false, true, true, false), Reason::Update),
            ((false, false, false, true, true, true), Reason::Update),
        ];
        for ((de, dr, hf, hd, ch, fs), want) in table {
            let o = Observation {
                deleted_event: de,
                deletion_requested: dr,
                has_finalizer: hf,
                has_diffbase: hd,
                changed: ch,
                first_sight: fs,
            };
            assert_eq!(detect(o), want, "{o:?}");
        }
    }
}
