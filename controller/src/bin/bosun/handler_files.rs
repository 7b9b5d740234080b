//! Handler files on the command line (`bosun dev handlers.py`, `bosun dev handlers.ts`): which
//! SDK serves them, and where the TypeScript SDK's command is. The decisions are pure (the
//! file system is a parameter), so they are table-tested; `supervise` probes the interpreters.

use std::path::{Path, PathBuf};

/// The SDK that serves a kind of handler file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// `.py`: `python -m bosun FILE…` (Bosun's Python SDK), as `kopf run FILE` does.
    Python,
    /// `.ts`, `.mts`, `.cts`, `.js`, `.mjs`, `.cjs`: `node …/bosun-operator/dist/cli.js FILE…`
    /// (Bosun's TypeScript SDK, which runs TypeScript through tsx).
    Node,
}

impl Sdk {
    /// The SDK for `file`, by its extension.
    pub fn of(file: &Path) -> Option<Sdk> {
        match file.extension()?.to_str()? {
            "py" => Some(Sdk::Python),
            "ts" | "mts" | "cts" | "js" | "mjs" | "cjs" => Some(Sdk::Node),
            _ => None,
        }
    }
}

/// The one SDK that serves all of `files` (with Python `-m` modules when `modules`); the error
/// says which file no SDK serves, or that two languages were mixed.
pub fn sdk_for(files: &[PathBuf], modules: bool) -> Result<Sdk, String> {
    let mut found = modules.then_some(Sdk::Python);
    for file in files {
        let Some(sdk) = Sdk::of(file) else {
            return Err(format!(
                "{}: a handler file must be Python (.py) or TypeScript/JavaScript (.ts, .mts, .cts, .js, .mjs, .cjs); \
                 for a server in another language give its command after --",
                file.display()
            ));
        };
        match found {
            Some(other) if other != sdk => {
                return Err(format!(
                    "{}: handler files of one language at a time (Python files and -m modules, or TypeScript/JavaScript files); \
                     run a second `bosun` for the other, or give one server's command after --",
                    file.display()
                ));
            }
            _ => found = Some(sdk),
        }
    }
    found.ok_or_else(|| "no handler files".to_string())
}

/// Where the TypeScript SDK's package is installed, relative to a `node_modules` folder.
pub const NODE_CLI: &str = "node_modules/bosun-operator/dist/cli.js";

/// The TypeScript SDK's command for `file`: `node_modules/bosun-operator/dist/cli.js` in the
/// file's folder or the nearest one above it (as Node resolves the file's own imports), else
/// in `cwd` or above; `None` when neither has it. `exists` is the file system.
pub fn node_cli(file: &Path, cwd: &Path, exists: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let from_file = file.parent().into_iter().flat_map(Path::ancestors);
    from_file.chain(cwd.ancestors()).map(|dir| dir.join(NODE_CLI)).find(|cli| exists(cli))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdk_is_chosen_by_the_files_extensions() {
        let cases: &[(&[&str], bool, Result<Sdk, &str>)] = &[
            (&["h.py"], false, Ok(Sdk::Python)),
            (&["a.py", "b.py"], false, Ok(Sdk::Python)),
            (&[], true, Ok(Sdk::Python)),
            (&["h.ts"], false, Ok(Sdk::Node)),
            (&["h.mjs", "i.js", "j.cjs", "k.mts", "l.cts"], false, Ok(Sdk::Node)),
            (&["h.ts"], true, Err("of one language")),
            (&["h.py", "i.ts"], false, Err("i.ts: handler files of one language")),
            (&["h.go"], false, Err("h.go: a handler file must be Python")),
            (&["Makefile"], false, Err("a handler file must be")),
            (&[], false, Err("no handler files")),
        ];
        for (files, modules, want) in cases {
            let files: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
            match (sdk_for(&files, *modules), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{files:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{files:?}: {got}"),
                (got, want) => panic!("{files:?} modules={modules}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_typescript_sdk_is_found_next_to_the_file_first_then_from_the_working_folder() {
        let installed = |dirs: &'static [&'static str]| move |p: &Path| dirs.iter().any(|d| Path::new(d).join(NODE_CLI) == p);
        let cases: &[(&str, &str, &'static [&'static str], Option<&str>)] = &[
            ("/p/ops/h.ts", "/w", &["/p/ops"], Some("/p/ops")),
            ("/p/ops/src/h.ts", "/w", &["/p/ops"], Some("/p/ops")),
            ("/p/ops/src/h.ts", "/w", &["/p/ops/src", "/p/ops"], Some("/p/ops/src")),
            ("/p/ops/h.ts", "/w/x", &["/w"], Some("/w")),
            ("/p/ops/h.ts", "/w", &["/p", "/w"], Some("/p")),
            ("/p/ops/h.ts", "/w", &[], None),
        ];
        for (file, cwd, dirs, want) in cases {
            let got = node_cli(Path::new(file), Path::new(cwd), installed(dirs));
            assert_eq!(got, want.map(|d| Path::new(d).join(NODE_CLI)), "{file} from {cwd} with {dirs:?}");
        }
    }
}
