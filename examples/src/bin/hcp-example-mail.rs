//! `hcp-example-mail`: the user-binding CLI of the `mail` gold pack (seeds §4.7).
//!
//! Mail lives in Maildir folders (`tmp/`, `new/`, `cur/`; a message is written to `tmp/`
//! under a unique name and renamed into `new/`), one per principal:
//! `ROOT/PRINCIPAL/Maildir`, with sent copies in `ROOT/PRINCIPAL/Maildir/.Sent`. Project
//! notes live in `ROOT/projects/PROJECT/notes/`. ROOT is `--root`, else
//! `$HOME/.hcp-example-mail`; PRINCIPAL is `--principal`, else `$HCP_PRINCIPAL_ID` (hcp
//! sets it, RUNTIME §5).
//!
//! ```text
//! mail connect [--principal P]                         print the credential: {"token": "…"}
//! mail list [--principal P] [--root DIR] [--json]      the inbox, oldest first
//! mail send --to ADDR --subject S --body B --confirm [--principal P] [--root DIR] [--json]
//!                                                      needs $HCP_BINDING_TOKEN from `connect`
//! mail watch [--principal P] [--root DIR] [--once | --count N] [--backlog] [--interval-ms MS]
//!                                                      one JSON line per message landing in new/
//! mail note --project P --title T --body B [--principal P] [--root DIR] [--json]
//! mail deliver --to P --from F --subject S --body B [--root DIR] [--json]
//!                                                      deliver an incoming message (demos, tests)
//! ```

use hcp_examples::{Failure, Opt, Outcome, out_json, out_line, parse_args, parse_count, run};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::fs::DirBuilder;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const USAGE: &str = "usage: mail connect [--principal P]
       mail list [--principal P] [--root DIR] [--json]
       mail send --to ADDR --subject S --body B --confirm [--principal P] [--root DIR] [--json]
       mail watch [--principal P] [--root DIR] [--once | --count N] [--backlog] [--interval-ms MS]
       mail note --project P --title T --body B [--principal P] [--root DIR] [--json]
       mail deliver --to P --from F --subject S --body B [--root DIR] [--json]";

/// The largest body, bytes.
const MAX_BODY: usize = 64 * 1024;
/// The longest header value (subject, title, address), characters.
const MAX_HEADER: usize = 200;
/// The credential prefix.
const TOKEN_PREFIX: &str = "mailtok-";

fn main() -> ExitCode {
    run(USAGE, dispatch)
}

fn dispatch(args: Vec<String>) -> Outcome {
    let Some((cmd, rest)) = args.split_first() else {
        return Err(Failure::usage("missing command"));
    };
    match cmd.as_str() {
        "connect" => connect(rest),
        "list" => list(rest),
        "send" => send(rest),
        "watch" => watch(rest),
        "note" => note(rest),
        "deliver" => deliver(rest),
        "help" | "--help" => out_line(USAGE),
        other => Err(Failure::usage(format!("unknown command `{other}`"))),
    }
}

/// Whether `id` is usable as one path component: 1 to 128 of `A-Za-z0-9._@:-`, not
/// starting with `.` or `-`.
fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.starts_with('.')
        && !id.starts_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | ':' | '-'))
}

fn principal(p: &hcp_examples::Parsed) -> Result<String, Failure> {
    let id = match p.value("principal") {
        Some(v) => v.to_owned(),
        None => std::env::var("HCP_PRINCIPAL_ID").map_err(|_| {
            Failure::usage("no principal: pass --principal or set HCP_PRINCIPAL_ID")
        })?,
    };
    if !valid_id(&id) {
        return Err(Failure::fail(format!("principal `{id}` is not a valid id")));
    }
    Ok(id)
}

fn root(p: &hcp_examples::Parsed) -> Result<PathBuf, Failure> {
    if let Some(r) = p.value("root") {
        if r.is_empty() {
            return Err(Failure::usage("--root may not be empty"));
        }
        return Ok(PathBuf::from(r));
    }
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Ok(PathBuf::from(h).join(".hcp-example-mail")),
        _ => Err(Failure::usage("no mail root: pass --root or set HOME")),
    }
}

fn maildir(root: &Path, principal: &str) -> PathBuf {
    root.join(principal).join("Maildir")
}

/// FNV-1a, 64 bits: a stable digest for the example credential (not a secret scheme).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn token_for(principal: &str) -> String {
    format!(
        "{TOKEN_PREFIX}{:016x}",
        fnv1a(format!("hcp-example-mail\0{principal}").as_bytes())
    )
}

fn connect(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json"), Opt::value("principal")])?;
    p.exactly(&[])?;
    let who = principal(&p)?;
    // Always JSON: hcp reads the credential from stdout (RUNTIME §8).
    out_json(&json!({ "token": token_for(&who) }))
}

fn header_value(name: &str, value: &str) -> Result<(), Failure> {
    if value.trim().is_empty() {
        return Err(Failure::fail(format!("{name} may not be empty")));
    }
    if value.chars().count() > MAX_HEADER {
        return Err(Failure::fail(format!(
            "{name} is longer than {MAX_HEADER} characters"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(Failure::fail(format!(
            "{name} may not hold control characters (newlines)"
        )));
    }
    Ok(())
}

fn body_value(body: &str) -> Result<(), Failure> {
    if body.len() > MAX_BODY {
        return Err(Failure::fail(format!(
            "the body is larger than {MAX_BODY} bytes"
        )));
    }
    if body.contains('\0') {
        return Err(Failure::fail("the body may not hold NUL"));
    }
    Ok(())
}

/// The principal an address delivers to: `bob` or `bob@anything` → `bob`.
fn recipient(addr: &str) -> Result<String, Failure> {
    let local = addr.split_once('@').map_or(addr, |(l, _)| l);
    if !valid_id(local) || local.contains(':') {
        return Err(Failure::fail(format!(
            "cannot deliver to `{addr}`: the part before `@` must be a principal id"
        )));
    }
    Ok(local.to_owned())
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A Maildir unique name: time, pid and a per-process counter.
fn unique_name() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    format!(
        "{}.M{:06}P{}Q{}.hcp-example",
        now.as_secs(),
        now.subsec_micros(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

fn private_dirs(dirs: &[PathBuf]) -> Result<(), Failure> {
    for d in dirs {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .map_err(|e| Failure::io(format!("cannot create `{}`", d.display()), &e))?;
    }
    Ok(())
}

/// Writes `content` into `tmp/` of Maildir `md` and renames it into `new/`.
fn store(md: &Path, name: &str, content: &str) -> Outcome {
    private_dirs(&[md.join("tmp"), md.join("new"), md.join("cur")])?;
    let tmp = md.join("tmp").join(name);
    let io = |e: std::io::Error| Failure::io(format!("cannot deliver into `{}`", md.display()), &e);
    let written = std::fs::File::create_new(&tmp).and_then(|mut f| {
        f.write_all(content.as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    std::fs::rename(&tmp, md.join("new").join(name)).map_err(io)
}

struct Message<'a> {
    from: &'a str,
    to: &'a str,
    subject: &'a str,
    body: &'a str,
}

fn render(id: &str, m: &Message<'_>) -> String {
    format!(
        "From: {}\nTo: {}\nSubject: {}\nMessage-ID: <{id}>\n\n{}",
        m.from, m.to, m.subject, m.body
    )
}

/// Reads the headers and the first body line of a stored message.
fn summary(path: &Path, id: &str, folder: &str) -> Value {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let (head, body) = text.split_once("\n\n").unwrap_or((text.as_str(), ""));
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let preview: String = body.lines().next().unwrap_or("").chars().take(80).collect();
    json!({
        "id": id,
        "folder": folder,
        "seen": folder == "cur",
        "from": header("from"),
        "to": header("to"),
        "subject": header("subject"),
        "preview": preview,
    })
}

/// The message file names of one Maildir sub-folder, sorted; a missing folder is empty.
fn names_in(dir: &Path) -> Result<Vec<String>, Failure> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Failure::io(format!("cannot read `{}`", dir.display()), &e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| Failure::io(format!("cannot read `{}`", dir.display()), &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn list(args: &[String]) -> Outcome {
    let p = parse_args(
        args,
        &[
            Opt::switch("json"),
            Opt::value("principal"),
            Opt::value("root"),
        ],
    )?;
    p.exactly(&[])?;
    let who = principal(&p)?;
    let md = maildir(&root(&p)?, &who);
    let mut messages = Vec::new();
    for folder in ["new", "cur"] {
        let dir = md.join(folder);
        for name in names_in(&dir)? {
            let id = name.split_once(':').map_or(name.as_str(), |(i, _)| i);
            messages.push(summary(&dir.join(&name), id, folder));
        }
    }
    messages.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    if p.json() {
        return out_json(&json!({ "principal": who, "messages": messages }));
    }
    if messages.is_empty() {
        return out_line(&format!("no messages for {who}"));
    }
    for m in &messages {
        let mark = if m["seen"] == json!(true) { " " } else { "*" };
        out_line(&format!(
            "{mark} {}  {}  {}",
            m["id"].as_str().unwrap_or_default(),
            m["from"].as_str().unwrap_or_default(),
            m["subject"].as_str().unwrap_or_default()
        ))?;
    }
    Ok(())
}

fn required<'a>(p: &'a hcp_examples::Parsed, name: &str) -> Result<&'a str, Failure> {
    p.value(name)
        .ok_or_else(|| Failure::usage(format!("missing option --{name}")))
}

fn send(args: &[String]) -> Outcome {
    let p = parse_args(
        args,
        &[
            Opt::switch("json"),
            Opt::switch("confirm"),
            Opt::value("to"),
            Opt::value("subject"),
            Opt::value("body"),
            Opt::value("principal"),
            Opt::value("root"),
        ],
    )?;
    p.exactly(&[])?;
    let (to, subject, body) = (
        required(&p, "to")?,
        required(&p, "subject")?,
        required(&p, "body")?,
    );
    header_value("the address", to)?;
    header_value("the subject", subject)?;
    body_value(body)?;
    let who = principal(&p)?;
    let rcpt = recipient(to)?;
    let root = root(&p)?;
    if !p.has("confirm") {
        return Err(Failure::refused("refusing to send without --confirm"));
    }
    match std::env::var("HCP_BINDING_TOKEN") {
        Err(_) => {
            return Err(Failure::refused(
                "no binding token: HCP_BINDING_TOKEN is unset (run `hcp connect mail` first)",
            ));
        }
        Ok(t) if t != token_for(&who) => {
            return Err(Failure::refused(format!(
                "the binding token does not belong to principal `{who}`"
            )));
        }
        Ok(_) => {}
    }
    let id = unique_name();
    let msg = Message {
        from: &who,
        to,
        subject,
        body,
    };
    let content = render(&id, &msg);
    store(&maildir(&root, &rcpt), &id, &content)?;
    store(&maildir(&root, &who).join(".Sent"), &id, &content)?;
    if p.json() {
        return out_json(&json!({ "sent": id, "from": who, "to": to, "subject": subject }));
    }
    out_line(&format!("sent {id} to {to}"))
}

fn deliver(args: &[String]) -> Outcome {
    let p = parse_args(
        args,
        &[
            Opt::switch("json"),
            Opt::value("to"),
            Opt::value("from"),
            Opt::value("subject"),
            Opt::value("body"),
            Opt::value("root"),
        ],
    )?;
    p.exactly(&[])?;
    let (to, from, subject, body) = (
        required(&p, "to")?,
        required(&p, "from")?,
        required(&p, "subject")?,
        required(&p, "body")?,
    );
    header_value("the sender", from)?;
    header_value("the subject", subject)?;
    body_value(body)?;
    let rcpt = recipient(to)?;
    let id = unique_name();
    let msg = Message {
        from,
        to,
        subject,
        body,
    };
    store(&maildir(&root(&p)?, &rcpt), &id, &render(&id, &msg))?;
    if p.json() {
        return out_json(&json!({ "delivered": id, "to": rcpt }));
    }
    out_line(&format!("delivered {id} to {rcpt}"))
}

fn watch(args: &[String]) -> Outcome {
    let p = parse_args(
        args,
        &[
            Opt::switch("once"),
            Opt::switch("backlog"),
            Opt::switch("json"),
            Opt::value("count"),
            Opt::value("interval-ms"),
            Opt::value("principal"),
            Opt::value("root"),
        ],
    )?;
    p.exactly(&[])?;
    let limit = match (p.has("once"), p.value("count")) {
        (true, Some(_)) => {
            return Err(Failure::usage("give --once or --count, not both"));
        }
        (true, None) => Some(1),
        (false, Some(n)) => match parse_count(n, "count")? {
            0 => return Err(Failure::usage("count must be at least 1")),
            n => Some(n),
        },
        (false, None) => None,
    };
    let interval = match p.value("interval-ms") {
        Some(ms) => match parse_count(ms, "interval")? {
            n @ 10..=60_000 => n,
            _ => {
                return Err(Failure::usage("interval-ms must be between 10 and 60000"));
            }
        },
        None => 250,
    };
    let who = principal(&p)?;
    let new_dir = maildir(&root(&p)?, &who).join("new");
    let mut seen: BTreeSet<String> = if p.has("backlog") {
        BTreeSet::new()
    } else {
        names_in(&new_dir)?.into_iter().collect()
    };
    // The readiness line: what was in new/ before it is not an event (unless --backlog);
    // whatever lands from now on is.
    {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "watching the inbox of {who}");
    }
    let mut emitted = 0u64;
    loop {
        for name in names_in(&new_dir)? {
            if !seen.insert(name.clone()) {
                continue;
            }
            let id = name.split_once(':').map_or(name.as_str(), |(i, _)| i);
            let mut event = summary(&new_dir.join(&name), id, "new");
            if let Some(obj) = event.as_object_mut() {
                obj.remove("seen");
                obj.insert("principal".into(), json!(who));
            }
            out_json(&event)?;
            emitted += 1;
            if limit.is_some_and(|l| emitted >= l) {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(interval));
    }
}

fn note(args: &[String]) -> Outcome {
    let p = parse_args(
        args,
        &[
            Opt::switch("json"),
            Opt::value("project"),
            Opt::value("title"),
            Opt::value("body"),
            Opt::value("principal"),
            Opt::value("root"),
        ],
    )?;
    p.exactly(&[])?;
    let (project, title, body) = (
        required(&p, "project")?,
        required(&p, "title")?,
        required(&p, "body")?,
    );
    if !valid_id(project) {
        return Err(Failure::fail(format!(
            "project `{project}` is not a valid id"
        )));
    }
    header_value("the title", title)?;
    body_value(body)?;
    let who = principal(&p)?;
    let dir = root(&p)?.join("projects").join(project).join("notes");
    private_dirs(std::slice::from_ref(&dir))?;
    let id = unique_name();
    let doc = json!({ "id": id, "project": project, "author": who, "title": title, "body": body });
    // Written beside the target and renamed, so a reader never sees half a note.
    let path = dir.join(format!("{id}.json"));
    let tmp = dir.join(format!(".{id}.tmp"));
    let written = std::fs::File::create_new(&tmp)
        .and_then(|mut f| {
            f.write_all(doc.to_string().as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Failure::io(
            format!("cannot write `{}`", path.display()),
            &e,
        ));
    }
    if p.json() {
        return out_json(&json!({ "created": id, "project": project, "title": title }));
    }
    out_line(&format!("created note {id} in project {project}"))
}
