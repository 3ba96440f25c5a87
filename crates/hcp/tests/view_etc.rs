//! Issue 23, the `/etc` index going stale (RUNTIME §5.1, the `/etc` row): an entry made in
//! `/etc` after the index was made, readable by root alone, is covered from the next call
//! on, because each call checks the change time of `/etc` and of the directories holding a
//! covered entry before it trusts the index. Root passes the owner bits of root's files, so
//! only a call as root would read it: the test makes the entry as root and calls as root.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;
mod view_common;

use confine_common::{As, SECRET};
use std::os::unix::fs::PermissionsExt;
use view_common::{Vw, assert_no_secret, sqlite3_or_skip, verb};

/// A file in `/etc`, removed on drop.
struct EtcFile(std::path::PathBuf);

impl Drop for EtcFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn an_entry_made_in_etc_after_the_index_is_covered_at_the_next_call() {
    if !confine_common::root() {
        common::skip::skip("making an entry in /etc needs root");
        return;
    }
    if !sqlite3_or_skip() {
        return;
    }
    let vw = Vw::new(As::Me);
    // The index exists (install made it) and a call has used it.
    let said = vw.sh(
        Some(&vw.reader),
        &verb("personal", "read"),
        "cat /etc/hostname",
    );
    assert!(!said.is_empty());
    let name = format!("hcp-test-{}-secret", std::process::id());
    let file = EtcFile(std::path::Path::new("/etc").join(&name));
    std::fs::write(&file.0, SECRET).unwrap();
    std::fs::set_permissions(&file.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    for land in view_common::LANDS {
        let (out, v) = vw.shell(
            Some(&vw.reader),
            &verb(land, "read"),
            &format!("cat /etc/{name}; echo done"),
        );
        let text = vw.w().render(&out);
        assert_no_secret(&text, &format!("{land}: /etc/{name}"));
        assert!(
            v["stdout"].as_str().unwrap_or_default().contains("done"),
            "{land}: {text}"
        );
    }
    drop(file);
}
