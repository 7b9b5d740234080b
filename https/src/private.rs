//! Files and directories only their owner may read or write (keys, Secrets, kubeconfigs).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// A new (or emptied) file only its owner may read or write (a log holding Secrets in plain
/// text, as etcd's, is renamed from such a file, so it is 0600 too).
pub fn private_file(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?; // made before, wider
    Ok(file)
}

/// Writes `bytes` to `path`, readable and writable by its owner alone.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    private_file(path)?.write_all(bytes)
}

/// Creates `dir` (and its parents) as 0700 where it does not exist; an existing directory is
/// the user's and keeps its mode.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}
