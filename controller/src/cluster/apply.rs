//! Applying YAML/JSON manifests (files or directories), as `kubectl apply` would for a
//! development loop: create, or merge the manifest into the existing object; CRDs are
//! waited for until established so the objects after them can be applied at once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::{Cluster, content, discovery};
use bosun_proto::v1::ResourceSelector;

/// A manifest that could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML.
    #[error("{path} is not valid YAML: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
    /// A document lacks apiVersion, kind or metadata.name.
    #[error("{path}: document {index} has no {what}")]
    Incomplete {
        /// The file.
        path: PathBuf,
        /// Which document (from 1).
        index: usize,
        /// What is missing.
        what: &'static str,
    },
    /// Nothing serves the document's kind.
    #[error("{path}: the API server serves no {kind} in {api_version}")]
    UnknownKind {
        /// The file.
        path: PathBuf,
        /// Its kind.
        kind: String,
        /// Its apiVersion.
        api_version: String,
    },
    /// The API server refused.
    #[error("{path}: {source}")]
    Api {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<super::Error>,
    },
}

/// Lists the manifest files under `path` (itself if a file), sorted.
pub fn manifest_files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let rd = std::fs::read_dir(path).map_err(|source| Error::Read { path: path.into(), source })?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")))
        .collect();
    files.sort();
    Ok(files)
}

/// Parses every non-empty document of a YAML (or JSON) text.
pub fn parse_documents(text: &str, path: &Path) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|source| Error::Parse { path: path.into(), source })?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

/// Applies every document in `path` (file or directory); returns `kind/name` lines.
pub async fn apply_path(cluster: &Cluster, path: &Path) -> Result<Vec<String>, Error> {
    let mut done = Vec::new();
    for file in manifest_files(path)? {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Read { path: file.clone(), source })?;
        for (i, doc) in parse_documents(&text, &file)?.into_iter().enumerate() {
            done.push(apply_one(cluster, &file, i + 1, doc).await?);
        }
    }
    Ok(done)
}

async fn apply_one(cluster: &Cluster, file: &Path, index: usize, mut doc: Value) -> Result<String, Error> {
    let s = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(String::from);
    let incomplete = |what| Error::Incomplete { path: file.into(), index, what };
    let api_version = s(&doc, "/apiVersion").ok_or_else(|| incomplete("apiVersion"))?;
    let kind = s(&doc, "/kind").ok_or_else(|| incomplete("kind"))?;
    let name = s(&doc, "/metadata/name").ok_or_else(|| incomplete("metadata.name"))?;
    let (group, version) =
        api_version.rsplit_once('/').map(|(g, v)| (g.to_string(), v.to_string())).unwrap_or((String::new(), api_version.clone()));
    let sel = ResourceSelector { group: group.clone(), version, name: kind.clone() };
    let api_err = |source| Error::Api { path: file.into(), source: Box::new(source) };
    let resource = discovery::resolve(cluster, &sel).await.map_err(api_err)?.ok_or_else(|| Error::UnknownKind {
        path: file.into(),
        kind: kind.clone(),
        api_version: api_version.clone(),
    })?;
    let namespace = if resource.namespaced { s(&doc, "/metadata/namespace").unwrap_or_else(|| "default".into()) } else { String::new() };
    if resource.namespaced {
        doc["metadata"]["namespace"] = Value::String(namespace.clone());
    }
    let created = match cluster.create(&resource.collection_path(Some(&namespace)), &doc).await {
        Ok(_) => "created",
        Err(e) if e.code() == Some(409) => {
            cluster.patch(&resource.object_path(&namespace, &name), content::MERGE, &doc).await.map_err(api_err)?;
            "configured"
        }
        Err(e) => return Err(api_err(e)),
    };
    if kind == "CustomResourceDefinition" {
        wait_established(cluster, &name).await;
    }
    let group_suffix = if group.is_empty() { String::new() } else { format!(".{group}") };
    Ok(format!("{}{group_suffix}/{name} {created}", resource.plural))
}

async fn wait_established(cluster: &Cluster, name: &str) {
    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        if let Ok(crd) = cluster.get(&path).await {
            let established = crd
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
            if established {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_split_and_skip_empty_ones() {
        let cases = [("a: 1\n---\nb: 2\n", 2), ("---\na: 1\n---\n", 1), ("", 0), ("{\"json\": true}", 1)];
        for (text, n) in cases {
            assert_eq!(parse_documents(text, Path::new("x.yaml")).unwrap().len(), n, "{text:?}");
        }
        let err = parse_documents("a: [1,\n", Path::new("bad.yaml")).unwrap_err();
        assert!(err.to_string().starts_with("bad.yaml is not valid YAML"), "{err}");
    }
}
