//! Annotation keys for handler ids, exactly as Kopf forms them, so that Bosun and Kopf find
//! each other's progress on the same objects.
//!
//! Kopf (0.28 up to 1.45 at least) knows two key versions and, by default, writes both and
//! reads the V2 key first:
//! - **V1** cuts the whole key (prefix included) to 63 characters: a name longer than
//!   `63 - len("<prefix>/")` keeps its head and gets `-<hash of the safe name>`.
//! - **V2** limits only the name to 63 characters, as Kubernetes does: a name longer than 63
//!   keeps its head and gets `-<hash of the raw id>` (the id before `/` is replaced).
//!
//! In both, the safe name is the id with `/` → `.` and `<`, `>` → `_` (1.44+; 1.29 replaced
//! only `/`); lengths count characters, not bytes; the hash is blake2b with a 4-byte digest,
//! base64 with `-` and `.` for `+` and `/`, without the trailing `=`. For short ids both
//! versions give the same key, and Kopf then writes it once.

use base64::Engine as _;
use blake2::digest::{Update, VariableOutput};

/// Kubernetes' limit on the name part of an annotation key.
const NAME_MAX: usize = 63;

/// The id with the characters Kubernetes does not allow in keys replaced, as Kopf does.
fn safe_name(id: &str) -> String {
    id.chars()
        .map(|c| match c {
            '/' => '.',
            '<' | '>' => '_',
            c => c,
        })
        .collect()
}

/// `-` and a short, stable hash of `text` (blake2b, 4 bytes, base64 with `-.` as the extra
/// characters, trailing `=`, `-`, `.` removed).
fn hash_suffix(text: &str) -> String {
    let mut hasher = blake2::Blake2bVar::new(4).expect("4 is a valid blake2b size");
    hasher.update(text.as_bytes());
    let mut digest = [0u8; 4];
    hasher.finalize_variable(&mut digest).expect("the buffer has the digest's size");
    let alphabet = base64::alphabet::Alphabet::new("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.")
        .expect("64 distinct printable characters");
    let engine = base64::engine::GeneralPurpose::new(&alphabet, base64::engine::general_purpose::PAD);
    format!("-{}", engine.encode(digest)).trim_end_matches(['=', '-', '.']).to_string()
}

/// The first `n` characters of `s`, where a negative `n` drops that many from the end (the
/// meaning of `s[:n]` in Kopf's Python, which V1 keys reach with very long prefixes).
fn head(s: &str, n: isize) -> &str {
    let len = s.chars().count() as isize;
    let n = if n < 0 { (len + n).max(0) } else { n.min(len) } as usize;
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

fn with_slash(prefix: &str) -> String {
    if prefix.is_empty() { String::new() } else { format!("{prefix}/") }
}

/// Kopf's V1 key for `id` under `prefix`: the whole key cut to 63 characters.
pub fn annotation_key_v1(prefix: &str, id: &str) -> String {
    let prefix = with_slash(prefix);
    let safe = safe_name(id);
    let room = NAME_MAX as isize - prefix.chars().count() as isize;
    let suffix = if safe.chars().count() as isize <= room { String::new() } else { hash_suffix(&safe) };
    let keep = room - suffix.chars().count() as isize;
    format!("{prefix}{}{suffix}", head(&safe, keep))
}

/// Kopf's V2 key for `id` under `prefix`: the name part cut to 63 characters.
pub fn annotation_key_v2(prefix: &str, id: &str) -> String {
    let suffix = if id.chars().count() > NAME_MAX { hash_suffix(id) } else { String::new() };
    let keep = NAME_MAX.saturating_sub(suffix.chars().count()) as isize;
    format!("{}{}{suffix}", with_slash(prefix), head(&safe_name(id), keep))
}

/// Every key Kopf reads and writes for `id`: the V2 key, then the V1 key if it differs.
pub fn kopf_keys(prefix: &str, id: &str) -> Vec<String> {
    // The usual case, read for every object in every cycle: a short ASCII id that needs no
    // replacing is its own name part, and both keys are `prefix/id`.
    let slash = usize::from(!prefix.is_empty());
    if prefix.is_ascii() && id.is_ascii() && prefix.len() + slash + id.len() <= NAME_MAX && !id.contains(['/', '<', '>']) {
        return vec![if prefix.is_empty() { id.to_string() } else { format!("{prefix}/{id}") }];
    }
    let (v2, v1) = (annotation_key_v2(prefix, id), annotation_key_v1(prefix, id));
    if v1 == v2 { vec![v2] } else { vec![v2, v1] }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys computed by Kopf 1.45.2 itself (identical code in 1.44.0 and 1.44.6):
    /// `AnnotationsProgressStorage(prefix='kopf.zalando.org')` and its `make_v1_key`,
    /// `make_v2_key` (`kopf/_cogs/configs/conventions.py`, `StorageKeyFormingConvention`).
    /// Columns: id, V1 key, V2 key.
    const KOPF_1_45_2: &[(&str, &str, &str)] = &[
        ("create_fn", "kopf.zalando.org/create_fn", "kopf.zalando.org/create_fn"),
        ("parent/child", "kopf.zalando.org/parent.child", "kopf.zalando.org/parent.child"),
        ("update_fn/spec.field", "kopf.zalando.org/update_fn.spec.field", "kopf.zalando.org/update_fn.spec.field"),
        ("fn/spec.a.b.c", "kopf.zalando.org/fn.spec.a.b.c", "kopf.zalando.org/fn.spec.a.b.c"),
        ("outer.<locals>.<lambda>", "kopf.zalando.org/outer._locals_._lambda_", "kopf.zalando.org/outer._locals_._lambda_"),
        // 46 = V1's room after `kopf.zalando.org/`.
        (
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ),
        (
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-xRCOAQ",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ),
        // 63 = V2's limit, then one over it.
        (
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-GINbRg",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ),
        (
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-SItAqA",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-SItAqA",
        ),
        // A sub-handler over V1's room: V1 hashes the safe name, V2 the raw id.
        (
            "create_children/child_child_child_child_child_child_child_child_",
            "kopf.zalando.org/create_children.child_child_child_child-9ZgH3g",
            "kopf.zalando.org/create_children.child_child_child_child_child_child_chil-pMHxXA",
        ),
        // A field handler over both limits.
        (
            "on_field_update/spec.template.spec.containers.resources.limits.memory",
            "kopf.zalando.org/on_field_update.spec.template.spec.cont-smD37A",
            "kopf.zalando.org/on_field_update.spec.template.spec.containers.resources.-du9bng",
        ),
        // Non-ASCII: lengths count characters; the hash is of the UTF-8 bytes.
        (
            "éééééééééééééééééééééééééééééééééééééééé",
            "kopf.zalando.org/éééééééééééééééééééééééééééééééééééééééé",
            "kopf.zalando.org/éééééééééééééééééééééééééééééééééééééééé",
        ),
        (
            "éééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé",
            "kopf.zalando.org/ééééééééééééééééééééééééééééééééééééééé-ccPs2g",
            "kopf.zalando.org/éééééééééééééééééééééééééééééééééééééééééééééééééééééééé-ccPs2g",
        ),
        // Kopf's mark for ReplicaSets owned by Deployments is appended to the id first.
        ("create_fn-ofDRS", "kopf.zalando.org/create_fn-ofDRS", "kopf.zalando.org/create_fn-ofDRS"),
        (
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-ofDRS",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-V713dQ",
            "kopf.zalando.org/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-V713dQ",
        ),
    ];

    #[test]
    fn keys_match_those_kopf_computes() {
        for (id, v1, v2) in KOPF_1_45_2 {
            assert_eq!(
                (annotation_key_v1("kopf.zalando.org", id), annotation_key_v2("kopf.zalando.org", id)),
                (v1.to_string(), v2.to_string()),
                "{id}"
            );
            let want: Vec<String> = if v1 == v2 { vec![v2.to_string()] } else { vec![v2.to_string(), v1.to_string()] };
            assert_eq!(kopf_keys("kopf.zalando.org", id), want, "{id}");
        }
    }

    #[test]
    fn v1_keys_under_very_long_prefixes_cut_as_python_slices_do() {
        // Kopf 1.45.2 with prefix "p" * 59: `safe_key[:63 - 60 - 7]` drops characters from the end.
        let prefix = "p".repeat(59);
        let cases = [
            ("create_fn", "/creat-AZjFuA", "/create_fn"),
            ("xxxxxxxxxx", "/xxxxxx-1REKNw", "/xxxxxxxxxx"),
            ("parent/child", "/parent.c-39qqhg", "/parent.child"),
        ];
        for (id, v1, v2) in cases {
            assert_eq!(annotation_key_v1(&prefix, id), format!("{prefix}{v1}"), "{id}");
            assert_eq!(annotation_key_v2(&prefix, id), format!("{prefix}{v2}"), "{id}");
            assert_eq!(kopf_keys(&prefix, id), vec![format!("{prefix}{v2}"), format!("{prefix}{v1}")], "{id}");
        }
    }

    #[test]
    fn keys_without_a_prefix_have_no_slash() {
        assert_eq!(annotation_key_v1("", "a/b"), "a.b");
        assert_eq!(annotation_key_v2("", "a/b"), "a.b");
        assert_eq!(kopf_keys("", "a/b"), vec!["a.b"]);
        assert_eq!(kopf_keys("", "ab"), vec!["ab"]);
    }
}
