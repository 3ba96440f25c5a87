//! `hcp session start | end | list` (RUNTIME §4), owner only.
//!
//! Also the small helpers the owner-only commands share (`grant`, `revoke`, `audit`):
//! opening the home, refusing a caller with `HCP_SESSION` set, rendering store errors.

use crate::env;
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use hcp_store::session::{self, NewSession, PrincipalId, Session, SessionError, Timestamp};
use hcp_store::state::State;
use hcp_store::{Home, StoreError};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

/// Subcommands of `hcp session`.
#[derive(Debug, clap::Subcommand)]
pub enum SessionCommand {
    /// Start a session for a principal and print its token alone on stdout.
    Start(StartArgs),
    /// End a session by its token, or every session of a principal.
    End(EndArgs),
    /// List sessions (never their tokens).
    List(ListArgs),
}

/// Arguments of `hcp session start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// The principal the session speaks for (`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`, not
    /// `owner`).
    #[arg(long, value_name = "ID")]
    principal: String,
    /// The principal's role, for the runtime policy.
    #[arg(long)]
    role: Option<String>,
    /// A project the principal belongs to (repeatable; the first is the session's
    /// project for `brain` land).
    #[arg(long = "project", value_name = "P")]
    projects: Vec<String>,
    /// An attribute for the runtime policy (repeatable).
    #[arg(long = "attr", value_name = "KEY=VALUE")]
    attrs: Vec<String>,
    /// A data class the principal may see (repeatable).
    #[arg(long = "can-view", value_name = "CLASS")]
    can_view: Vec<String>,
    /// The sandbox working directory for `local` land (must exist). Taken as given, the
    /// empty string too, so that the workdir rules answer for it (`bad_workdir`, 64).
    #[arg(long, value_name = "DIR", value_parser = clap::builder::ValueParser::os_string())]
    workdir: Option<std::ffi::OsString>,
    /// Time to live: a whole number and `s`, `m`, `h` or `d` (default `8h`, 1s to 365d).
    #[arg(long, value_name = "DUR")]
    ttl: Option<String>,
}

/// Arguments of `hcp session end`.
#[derive(Debug, clap::Args)]
pub struct EndArgs {
    /// The session's token, or the id `hcp session list` shows; `-` reads the token from
    /// stdin (keeps it out of `ps`).
    #[arg(required_unless_present = "principal", conflicts_with = "principal")]
    token: Option<String>,
    /// End every session of this principal instead.
    #[arg(long, value_name = "ID")]
    principal: Option<String>,
}

/// Arguments of `hcp session list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp session …`.
pub fn run(c: SessionCommand) -> CliResult {
    require_owner("session")?;
    let rt = super::exec::runtime()?;
    let state = rt.state();
    match c {
        SessionCommand::Start(a) => {
            let mut a = a;
            if let Some(dir) = &a.workdir {
                let dir = hcp_runtime::workdir::for_session(
                    &rt,
                    &a.principal,
                    std::path::Path::new(dir),
                    Timestamp::now(),
                )
                .map_err(CliError::command)?;
                a.workdir = Some(dir.into_os_string());
            }
            start(&rt, a)
        }
        SessionCommand::End(a) => end(&rt, a),
        SessionCommand::List(a) => list(state, rt.home(), a),
    }
}

/// Refuses a caller that has `HCP_SESSION` set, valid or not (`owner_only`, exit 77):
/// owner-only commands never act on the token. The attempt is recorded as the contract's
/// refusals are ([`record_owner_only`]), when there is a store to record it in.
pub(crate) fn require_owner(command: &str) -> Result<(), CliError> {
    if let Some(token) = std::env::var_os(env::HCP_SESSION) {
        record_owner_only(command, &token.to_string_lossy());
        return Err(CliError::new(
            Code::OwnerOnly,
            format!("`hcp {command}` is for the owner only, and `HCP_SESSION` is set"),
        )
        .hint(format!(
            "the owner is the Unix user running `hcp` without `HCP_SESSION`: run `hcp {command}` in the owner's own shell with `HCP_SESSION` unset (`env -u HCP_SESSION hcp {command}`)"
        )));
    }
    Ok(())
}

/// Records a session holder's attempt at the owner's command `command` (RUNTIME §6: a
/// refusal is one record): a `refusal` with code `owner_only`, the principal and the
/// `session` the token names (`unknown` and no session when it names none that is live),
/// `verb_key` the command and `command` = `hcp COMMAND`. Nothing else of the store changes. Best
/// effort, like the refusals the contract leaves unrecorded: no store (`hcp init`), or a
/// trail that cannot take the record, leaves the refusal unrecorded and answered the same.
fn record_owner_only(command: &str, token: &str) {
    let Ok(home) = open_home() else {
        return;
    };
    let rt = hcp_runtime::Runtime::open(home);
    let state = rt.state();
    let session = state.session_resolve(token, Timestamp::now()).ok();
    let entry = hcp_store::audit::Entry {
        principal: session
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |s| s.principal.to_string()),
        project: None,
        pack_id: None,
        verb_key: command.to_owned(),
        operation: None,
        land: None,
        decision: hcp_store::audit::Decision::Deny,
        code: Some(Code::OwnerOnly),
        args_digest: state.args_digest(&[]).unwrap_or_default(),
        exit_code: None,
        duration_ms: 0,
        extra: [
            Some(("command".to_owned(), json!(format!("hcp {command}")))),
            session
                .as_ref()
                .map(|s| ("session".to_owned(), json!(s.short_id()))),
        ]
        .into_iter()
        .flatten()
        .collect(),
    };
    let _ = state.record(&entry);
}

/// The store's directory from `HCP_HOME` or the platform data directory (RUNTIME §3),
/// without looking at it.
pub(crate) fn home_root() -> Result<std::path::PathBuf, CliError> {
    hcp_store::resolve_home(
        std::env::var_os(env::HCP_HOME).as_deref(),
        hcp_store::home::platform_data_dir,
    )
    .map_err(|e| store_error(&e))
}

/// The store from `HCP_HOME` or the platform data directory (RUNTIME §3, §4): a store
/// made on purpose (`hcp init`); a missing one, or a directory that is none, is `no_store`
/// (66) and nothing is created; one of an earlier version is migrated first.
pub(crate) fn open_home() -> Result<Home, CliError> {
    hcp_store::made::open(&home_root()?).map_err(|e| store_error(&e))
}

/// The store from `HCP_HOME` for a command that only reads it (`hcp audit verify`, `hcp
/// audit tail`, `hcp doctor`): as [`open_home`], but nothing is written — a store of an
/// earlier version is not migrated ([`hcp_store::made::open_read`]).
pub(crate) fn open_home_read() -> Result<(Home, hcp_store::made::Found), CliError> {
    hcp_store::made::open_read(&home_root()?).map_err(|e| store_error(&e))
}

/// A store error as a CLI error: its code, exit 74, its causes.
pub(crate) fn store_error(e: &StoreError) -> CliError {
    let c = with_causes(CliError::new(e.code(), e.to_string()), e);
    match e.hint() {
        Some(h) => c.hint(h),
        None => c,
    }
}

/// Adds the source chain of `e` as `Caused by:` lines.
pub(crate) fn with_causes(mut c: CliError, e: &dyn std::error::Error) -> CliError {
    let mut source = e.source();
    while let Some(s) = source {
        c = c.cause(s);
        source = s.source();
    }
    c
}

/// A session error as a CLI error: bad input exits 2, a refused token 1, the store 74
/// (the code table's statuses in a command).
pub(crate) fn session_error(e: &SessionError) -> CliError {
    match e {
        SessionError::Store(s) => store_error(s),
        _ => with_causes(CliError::new(e.code(), e.to_string()), e),
    }
}

/// Writes to stdout; a closed pipe is not an error.
pub(crate) fn print(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn start(rt: &hcp_runtime::Runtime, a: StartArgs) -> CliResult {
    let state = rt.state();
    let ttl = a
        .ttl
        .as_deref()
        .map(session::parse_ttl)
        .transpose()
        .map_err(|e| session_error(&e))?;
    let new = NewSession {
        principal: a.principal,
        role: a.role,
        projects: a.projects,
        attributes: a.attrs,
        can_view: a.can_view,
        workdir: a.workdir.map(PathBuf::from),
        ttl,
    };
    let prepared = session::prepare(&new, Timestamp::now()).map_err(|e| session_error(&e))?;
    // An act of authority (RUNTIME §6): recorded, with the session's id, before it is
    // stored.
    let act = super::authority::record(rt, "session start", session_facts(&prepared.1))?;
    let (token, s) = act
        .settle(
            state.session_start_prepared(prepared),
            hcp_store::session::SessionError::code,
        )
        .map_err(|e| session_error(&e))?;
    print(&format!("{}\n", token.as_str()));
    eprintln!(
        "started a session for `{}`, expiring at `{}`",
        s.principal,
        session::format_ts(s.expires_at)
    );
    Ok(exit::OK)
}

fn read_token(arg: &str) -> Result<String, CliError> {
    if arg != "-" {
        return Ok(arg.to_owned());
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| CliError::new(Code::StoreIo, "cannot read the token from stdin").cause(e))?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}

/// What a `session start` or `session end` record says of a session: its id and its
/// principal's facts, never its token.
fn session_facts(s: &Session) -> serde_json::Value {
    json!({
        "session": s.short_id(),
        "principal": s.principal,
        "role": s.role,
        "projects": s.projects,
        "attributes": s.attributes,
        "can_view": s.can_view,
        "workdir": s.workdir,
        "expires_at": session::format_ts(s.expires_at),
    })
}

fn end(rt: &hcp_runtime::Runtime, a: EndArgs) -> CliResult {
    let state = rt.state();
    let now = Timestamp::now();
    if let Some(p) = a.principal {
        let p = PrincipalId::parse(&p).map_err(|e| session_error(&e))?;
        let open: Vec<String> = state
            .session_list()
            .map_err(|e| store_error(&e))?
            .iter()
            .filter(|s| s.principal == p && s.ended_at.is_none())
            .map(|s| s.short_id().to_owned())
            .collect();
        let act = super::authority::begin(rt, "session end")?;
        if !open.is_empty() {
            super::authority::record_act(
                &act,
                json!({"principal": p.to_string(), "sessions": open}),
            )?;
        }
        let ended = act
            .settle(
                state.session_end_principal(&p, now),
                hcp_store::session::SessionError::code,
            )
            .map_err(|e| session_error(&e))?;
        match ended.len() {
            0 => print(&format!("no session of `{p}` to end\n")),
            1 => print(&format!("ended 1 session of `{p}`\n")),
            n => print(&format!("ended {n} sessions of `{p}`\n")),
        }
        return Ok(exit::OK);
    }
    let token = read_token(a.token.as_deref().unwrap_or("-"))?;
    let act = super::authority::begin(rt, "session end")?;
    let ended = if is_listed_id(&token) {
        let found: Vec<Session> = state
            .session_list()
            .map_err(|e| store_error(&e))?
            .into_iter()
            .filter(|s| s.short_id() == token)
            .collect();
        match found.as_slice() {
            [one] => {
                if one.ended_at.is_none() {
                    super::authority::record_act(
                        &act,
                        json!({"principal": one.principal.to_string(), "sessions": [one.short_id()]}),
                    )?;
                }
                state.session_end_digest(&one.token_sha256, now)
            }
            [] => {
                if let Some((file, why)) = damaged_with_id(rt, &token)? {
                    return end_damaged(rt, &act, &token, &file, &why);
                }
                return Err(CliError::new(
                    Code::BadSession,
                    format!("no session has the id `{token}`"),
                )
                .hint("`hcp session list` shows each session's id"));
            }
            _ => {
                return Err(CliError::new(
                    Code::BadSession,
                    format!("several sessions have the id `{token}`"),
                )
                .hint("end it by its token, or every session of its principal with `hcp session end --principal ID`"));
            }
        }
    } else {
        if session::is_token_shape(&token) {
            let digest = format!("sha256:{}", session::token_digest(&token));
            let sessions = state.session_list().map_err(|e| store_error(&e))?;
            if let Some(s) = sessions
                .iter()
                .find(|s| s.token_sha256 == digest && s.ended_at.is_none())
            {
                super::authority::record_act(
                    &act,
                    json!({"principal": s.principal.to_string(), "sessions": [s.short_id()]}),
                )?;
            }
        }
        state.session_end(&token, now)
    };
    let (s, changed) = act
        .settle(ended, hcp_store::session::SessionError::code)
        .map_err(|e| session_error(&e))?;
    if changed {
        print(&format!(
            "ended the session `{}` of `{}`\n",
            s.short_id(),
            s.principal
        ));
    } else {
        print(&format!(
            "the session `{}` of `{}` was already ended\n",
            s.short_id(),
            s.principal
        ));
    }
    Ok(exit::OK)
}

/// The id `hcp session list` shows for a damaged session file: the first 12 hex digits of
/// its name (the digest of its token), as for a sound one.
fn damaged_id(p: &std::path::Path) -> String {
    p.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.get(..12))
        .unwrap_or("?")
        .to_owned()
}

/// The damaged session file (file state only) whose id is `id`, with why it is damaged.
///
/// # Errors
/// `store_io` when the sessions directory cannot be read.
fn damaged_with_id(
    rt: &hcp_runtime::Runtime,
    id: &str,
) -> Result<Option<(PathBuf, String)>, CliError> {
    if rt.state().backend() != "file" {
        return Ok(None);
    }
    let damaged = session::damaged(rt.home()).map_err(|e| store_error(&e))?;
    let mut found = damaged.into_iter().filter(|(p, _)| damaged_id(p) == id);
    match (found.next(), found.next()) {
        (Some(one), None) => Ok(Some(one)),
        _ => Ok(None),
    }
}

/// `hcp session end ID` of a session whose file is damaged (RUNTIME §4 "Fault
/// isolation"): its token is refused already (`store_damaged`), and ending it removes the
/// file (its token is then unknown, refused `bad_session`: no token gains anything). The
/// act is recorded first, with the file, why it is damaged and the digest of its bytes
/// (what was removed, for whoever looks later; the principal it named cannot be
/// believed); an act that cannot be recorded removes nothing (74). The file is removed
/// under the store lock only if it is still damaged then.
fn end_damaged(
    rt: &hcp_runtime::Runtime,
    act: &hcp_runtime::authority::Act<'_>,
    id: &str,
    file: &std::path::Path,
    why: &str,
) -> CliResult {
    let digest = std::fs::read(file)
        .ok()
        .map(|b| hcp_store::digest::sha256_tagged(&b));
    let name = file
        .strip_prefix(rt.home().root())
        .unwrap_or(file)
        .display()
        .to_string();
    super::authority::record_act(
        act,
        json!({
            "principal": "unknown",
            "sessions": [id],
            "damaged": {"file": name, "reason": why, "digest": digest},
        }),
    )?;
    let removed = act.settle(
        session::remove_damaged(rt.home(), file).and_then(|removed| {
            if removed {
                Ok(())
            } else {
                Err(StoreError::Damaged {
                    path: file.to_path_buf(),
                    reason:
                        "it changed while it was being ended: it is gone, or reads as a session now"
                            .into(),
                })
            }
        }),
        StoreError::code,
    );
    removed.map_err(|e| {
        store_error(&e).hint(format!(
            "`hcp session list` shows what is there now; `hcp session end {id}` again ends it"
        ))
    })?;
    print(&format!(
        "ended the session `{id}`, whose file `{}` was damaged ({why}): the file is removed, and its token is refused (`bad_session`)\n",
        file.display()
    ));
    Ok(exit::OK)
}

/// Whether `arg` is a session id as `session list` shows it (12 lowercase hex digits).
fn is_listed_id(arg: &str) -> bool {
    arg.len() == 12 && arg.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn session_json(s: &Session, now: Timestamp) -> serde_json::Value {
    json!({
        "id": s.short_id(),
        "principal": s.principal,
        "role": s.role,
        "projects": s.projects,
        "attributes": s.attributes,
        "can_view": s.can_view,
        "workdir": s.workdir,
        "created_at": session::format_ts(s.created_at),
        "expires_at": session::format_ts(s.expires_at),
        "ended_at": s.ended_at.map(session::format_ts),
        "state": s.state(now).as_str(),
    })
}

/// Lays out rows in columns separated by two spaces, without trailing blanks.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 < cols {
                line.push_str(&format!("{cell:<w$}  ", w = widths[c]));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn list(state: &dyn State, home: &hcp_store::Home, a: ListArgs) -> CliResult {
    let now = Timestamp::now();
    let sessions = state.session_list().map_err(|e| store_error(&e))?;
    // A damaged session file is listed as damaged, never a reason to list nothing
    // (RUNTIME §4 "Fault isolation"); `hcp doctor` names the command that removes it.
    let damaged = if state.backend() == "file" {
        session::damaged(home).map_err(|e| store_error(&e))?
    } else {
        Vec::new()
    };
    if a.json {
        let mut v: Vec<_> = sessions.iter().map(|s| session_json(s, now)).collect();
        v.extend(damaged.iter().map(
            |(p, why)| json!({"id": damaged_id(p), "state": "damaged", "file": p, "reason": why}),
        ));
        print(&format!("{}\n", json!(v)));
        return Ok(exit::OK);
    }
    if sessions.is_empty() && damaged.is_empty() {
        print("no sessions\n");
        return Ok(exit::OK);
    }
    let mut rows = vec![
        ["ID", "PRINCIPAL", "ROLE", "PROJECTS", "EXPIRES", "STATE"]
            .map(String::from)
            .to_vec(),
    ];
    for s in &sessions {
        rows.push(vec![
            s.short_id().to_owned(),
            s.principal.to_string(),
            s.role.clone().unwrap_or_else(|| "-".into()),
            if s.projects.is_empty() {
                "-".into()
            } else {
                s.projects.join(",")
            },
            session::format_ts(s.expires_at),
            s.state(now).as_str().to_owned(),
        ]);
    }
    for (p, _) in &damaged {
        let mut row = vec![damaged_id(p)];
        row.extend(["?", "-", "-", "-", "damaged"].map(String::from));
        rows.push(row);
    }
    print(&table(&rows));
    for (p, why) in &damaged {
        eprintln!(
            "warning: the session file `{}` is damaged ({why}); `hcp doctor` says how to remove it",
            p.display()
        );
    }
    Ok(exit::OK)
}
