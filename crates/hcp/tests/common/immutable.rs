//! A file or directory made immutable for as long as a guard lives (`chattr +i`, which
//! binds root too): how a test makes one store file refuse writes to the running `hcp`.

use std::path::{Path, PathBuf};

/// `chattr +i` on a path until dropped (`chattr -i` then).
pub struct Immutable(PathBuf);

impl Immutable {
    /// Makes `path` immutable; `None` when that cannot be done here (not root, no
    /// `chattr`, a file system without the flag): the caller skips.
    pub fn new(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        // `/proc/self` belongs to this process's effective user.
        if !std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
            return None;
        }
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(path.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}
