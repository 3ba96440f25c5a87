//! Protected names a call created (RUNTIME §5.1, "Protected names"): what the owner's tools
//! run next — a git hook, a harness's settings or skills, an editor task, a direnv file —
//! is not a call's to plant.
//!
//! Before a `local` call's child starts, [`watch`] notes, in the parent, what each
//! protected name of the workdir is: for every component of it inside the workdir
//! (`.git`, then `.git/hooks`), its device, inode and type, or that it is absent. When the
//! call has ended and before it answers, [`settle`] looks again: the shallowest component
//! that did not exist, or is no longer the same one, is moved into the store's quarantine
//! (`hcp_store::quarantine`), so a `.git/hooks` made in an existing `.git` moves alone, and
//! a `.git` the call made (a new repository, a `gitdir:` file, a symbolic link) moves whole,
//! with every name beneath it. Nothing is followed: a symbolic link is moved as a link.
//! A name that cannot be moved is removed from the workdir: it is never left in place.
//!
//! The result and the outcome name each (`protected_created`). The view makes every
//! protected name that exists read-only, so a call cannot change one; this catches the
//! names it creates, which the view cannot bind because they do not exist yet.

use hcp_model::Land;
use hcp_store::Home;
use serde_json::{Value, json};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What one file system entry is: device, inode and type (`S_IFMT` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ident {
    dev: u64,
    ino: u64,
    kind: u32,
}

/// A protected name and what each of its components was before the call.
#[derive(Debug, Clone)]
struct Watched {
    name: PathBuf,
    before: Vec<Option<Ident>>,
}

/// What the protected names of a call's workdir were before its child started.
#[derive(Debug, Clone)]
pub struct Watch {
    workdir: PathBuf,
    names: Vec<Watched>,
}

/// The `lstat`s of one look at the workdir, each path looked at once: the protected names
/// share their first components (`.git` for six of them), so a look costs one `lstat` per
/// distinct component, not one per name and component.
#[derive(Default)]
struct Looks(Vec<(PathBuf, Option<Ident>)>);

impl Looks {
    /// What `at` is, without following a link; `None` when it cannot be looked at.
    fn ident(&mut self, at: &Path) -> Option<Ident> {
        if let Some((_, seen)) = self.0.iter().find(|(p, _)| p == at) {
            return *seen;
        }
        let seen = std::fs::symlink_metadata(at).ok().map(|m| Ident {
            dev: m.dev(),
            ino: m.ino(),
            kind: m.mode() & libc::S_IFMT,
        });
        self.0.push((at.to_owned(), seen));
        seen
    }
}

/// The identity of each component of `name` under `workdir`, without following a link,
/// up to the first that is absent or is not a directory (nothing can be beneath it).
fn idents(looks: &mut Looks, workdir: &Path, name: &Path) -> Vec<Option<Ident>> {
    let mut out = Vec::new();
    let mut at = workdir.to_path_buf();
    for c in name.components() {
        at.push(c);
        let seen = looks.ident(&at);
        out.push(seen);
        if seen.is_none_or(|i| i.kind != libc::S_IFDIR) {
            break;
        }
    }
    out
}

/// Notes the protected names `names` of `workdir` before a call of `land` starts: `None`
/// for `personal` and `brain` calls, which have no workdir. A few `lstat`s, no write.
pub fn watch<S: AsRef<Path>>(land: Land, workdir: &Path, names: &[S]) -> Option<Watch> {
    if land != Land::Local {
        return None;
    }
    let mut looks = Looks::default();
    let names = names
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| hcp_store::quarantine::plain_relative(n))
        .map(|n| Watched {
            name: n.to_owned(),
            before: idents(&mut looks, workdir, n),
        })
        .collect();
    Some(Watch {
        workdir: workdir.to_owned(),
        names,
    })
}

/// [`watch`] of a call with the protected names of `config.json`
/// ([`crate::prepare::protected_in_workdir`], the list the view binds read-only); none
/// when the configuration did not load (the call was refused before it ran).
pub fn watch_call(
    land: Land,
    workdir: &Path,
    config: &Result<hcp_store::config::RuntimeConfig, hcp_store::config::ConfigError>,
) -> Option<Watch> {
    let config = config.as_ref().ok()?;
    watch(land, workdir, &crate::prepare::protected_in_workdir(config))
}

/// What [`settle`] did with one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// The name, relative to the workdir: the shallowest component the call made or
    /// replaced (`.git/hooks`, or `.git` for a repository the call made).
    pub name: PathBuf,
    /// Where the quarantine keeps it; `None` when it could not be moved and was removed.
    pub kept: Option<PathBuf>,
    /// Whether everything beneath it was kept (a copy across filesystems is bounded).
    pub complete: bool,
    /// Why it could not be moved, or removed, when it could not.
    pub error: Option<String>,
}

/// The names of `watch` that the call made or replaced, shallowest first, each once.
fn created(watch: &Watch) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut looks = Looks::default();
    for w in &watch.names {
        let after = idents(&mut looks, &watch.workdir, &w.name);
        let changed = after.iter().enumerate().find(|(i, now)| {
            let was = w.before.get(*i).copied().flatten();
            now.is_some() && **now != was
        });
        if let Some((i, _)) = changed {
            let name: PathBuf = w.name.components().take(i + 1).collect();
            out.push(name);
        }
    }
    out.sort();
    out.dedup();
    // A name beneath another that moves goes with it.
    let all = out.clone();
    out.retain(|n| !all.iter().any(|o| o != n && n.starts_with(o)));
    out
}

/// Moves each protected name the call made or replaced since `watch` into the quarantine
/// of call `audit_id` (see the module docs). Runs after the child (and, in its PID
/// namespace, every descendant) has ended.
pub fn settle(home: &Home, watch: &Watch, audit_id: &str) -> Vec<Created> {
    created(watch)
        .into_iter()
        .map(|name| {
            match hcp_store::quarantine::quarantine(home, audit_id, &watch.workdir, &name) {
                Ok(m) => Created {
                    name,
                    kept: Some(m.to),
                    complete: m.complete,
                    error: None,
                },
                Err(e) => {
                    // Never left in place: what could not be kept is removed.
                    let removed = hcp_store::quarantine::discard(&watch.workdir, &name);
                    Created {
                        name,
                        kept: None,
                        complete: false,
                        error: Some(match removed {
                            Ok(()) => format!("{e}; removed from the workdir instead"),
                            Err(r) => format!("{e}; and it could not be removed: {r}"),
                        }),
                    }
                }
            }
        })
        .collect()
}

/// The `protected_created` field of the result: the names, relative to the workdir.
pub fn result_field(created: &[Created]) -> Value {
    Value::Array(
        created
            .iter()
            .map(|c| Value::String(c.name.to_string_lossy().into_owned()))
            .collect(),
    )
}

/// The `protected_created` field of the outcome record: each name, whether the
/// quarantine kept it (whole) and why not.
pub fn audit_field(created: &[Created]) -> Value {
    Value::Array(
        created
            .iter()
            .map(|c| {
                let mut v = json!({
                    "name": c.name.to_string_lossy(),
                    "kept": c.kept.is_some(),
                    "complete": c.complete,
                });
                if let Some(e) = &c.error {
                    v["error"] = Value::String(e.clone());
                }
                v
            })
            .collect(),
    )
}

/// The pipeline's step after the run (RUNTIME §5.1): settles `watch` for the admitted
/// call `audit_id` and, when the call created a protected name, names each in the
/// result's and the outcome's `protected_created`.
pub fn after_run(
    home: &Home,
    watch: Option<&Watch>,
    audit_id: &str,
    facts: &mut hcp_model::CallFacts,
) {
    let Some(w) = watch else {
        return;
    };
    let created = settle(home, w, audit_id);
    if created.is_empty() {
        return;
    }
    facts.protected_created = Some(hcp_model::facts::ProtectedCreated {
        audit: audit_field(&created),
        result: result_field(&created),
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn world() -> (tempfile::TempDir, Home, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let home = Home::open(t.path().join("store")).unwrap();
        let work = t.path().join("work");
        std::fs::create_dir_all(work.join(".git/objects")).unwrap();
        std::fs::write(work.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(work.join(".claude")).unwrap();
        (t, home, work)
    }

    fn names(c: &[Created]) -> Vec<String> {
        c.iter()
            .map(|c| c.name.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn only_what_the_call_made_moves() {
        let (_t, home, work) = world();
        let w = watch(Land::Local, &work, &hcp_adapter::PROTECTED_IN_WORKDIR).unwrap();
        // The call's own work and the names that existed stay.
        std::fs::write(work.join(".git/objects/ab"), "x").unwrap();
        std::fs::write(work.join("notes.txt"), "x").unwrap();
        std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
        std::fs::write(work.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(work.join(".envrc"), "x").unwrap();
        std::fs::create_dir_all(work.join(".agents/skills/x")).unwrap();
        std::fs::write(work.join(".agents/skills/x/SKILL.md"), "x").unwrap();
        let c = settle(&home, &w, "call-1");
        assert_eq!(names(&c), vec![".agents", ".envrc", ".git/hooks"]);
        assert!(c.iter().all(|c| c.kept.is_some() && c.error.is_none()));
        assert!(!work.join(".git/hooks").exists());
        assert!(!work.join(".envrc").exists());
        assert!(work.join(".git/config").exists() && work.join(".git/objects/ab").exists());
        assert!(work.join(".claude").is_dir() && work.join("notes.txt").exists());
        assert_eq!(
            std::fs::read_to_string(
                home.root()
                    .join("quarantine/call-1/files/.git/hooks/pre-commit")
            )
            .unwrap(),
            "#!/bin/sh\n"
        );
    }

    #[test]
    fn a_repository_the_call_made_moves_whole() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::open(t.path().join("store")).unwrap();
        let work = t.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let makes: [fn(&Path); 3] = [
            |w: &Path| {
                std::fs::create_dir_all(w.join(".git/hooks")).unwrap();
                std::fs::write(w.join(".git/HEAD"), "ref: x").unwrap();
            },
            |w: &Path| std::fs::write(w.join(".git"), "gitdir: ./evil\n").unwrap(),
            |w: &Path| std::os::unix::fs::symlink("/tmp", w.join(".git")).unwrap(),
        ];
        for make in makes {
            let w = watch(Land::Local, &work, &hcp_adapter::PROTECTED_IN_WORKDIR).unwrap();
            make(&work);
            let c = settle(&home, &w, "call-2");
            assert_eq!(names(&c), vec![".git"]);
            assert!(std::fs::symlink_metadata(work.join(".git")).is_err());
            let _ = std::fs::remove_dir_all(home.root().join("quarantine"));
        }
    }

    #[test]
    fn a_replaced_name_is_one_the_call_made() {
        let (_t, home, work) = world();
        let w = watch(Land::Local, &work, &hcp_adapter::PROTECTED_IN_WORKDIR).unwrap();
        std::fs::remove_dir(work.join(".claude")).unwrap();
        std::fs::write(work.join(".claude"), "planted").unwrap();
        let c = settle(&home, &w, "call-3");
        assert_eq!(names(&c), vec![".claude"]);
    }

    #[test]
    fn other_lands_have_no_workdir_to_watch() {
        let (_t, _home, work) = world();
        assert!(watch(Land::Personal, &work, &[".envrc"]).is_none());
        assert!(watch(Land::Brain, &work, &[".envrc"]).is_none());
        let w = watch(Land::Local, &work, &["../x", "/etc", ".envrc"]).unwrap();
        assert_eq!(w.names.len(), 1);
    }
}
