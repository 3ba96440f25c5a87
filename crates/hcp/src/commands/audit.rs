//! `hcp audit verify | tail | checkpoint` (RUNTIME §6), owner only: the trail records
//! every principal's calls, so it is the owner's to read. Every subcommand reads the
//! records through the state backend (`hcp_store::state::State`): the file store's one
//! trail, or a database's chains, one per machine (RUNTIME §9).

mod export;
mod follow;

use super::session::{print, require_owner, with_causes};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_store::audit::checkpoint::Checkpoint;
use hcp_store::audit::witness::Held;
use hcp_store::audit::{
    AuditError, AuditReport, ChainCheck, CheckpointSource, Fault, Kind, Record, TailLine,
    VerifyReport,
};
use hcp_store::state::State;
use serde_json::{Value, json};
use std::path::PathBuf;

/// Subcommands of `hcp audit`.
#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Walk the hash chain, check it against its anchor (and a checkpoint), and name the
    /// first fault (exit 0 sound, 1 broken).
    Verify(VerifyArgs),
    /// Show the latest records, oldest first; `--follow` streams new ones as JSON lines.
    Tail(TailArgs),
    /// Print a signed checkpoint of the trail (count, head hash, time) to keep elsewhere.
    Checkpoint,
    /// Ship the trail to an OpenTelemetry collector over OTLP/HTTP, one span per call and
    /// per act of authority, resuming where the last export stopped.
    Export(export::ExportArgs),
}

/// Arguments of `hcp audit verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Print the report as a JSON object.
    #[arg(long)]
    json: bool,
    /// A checkpoint made by `hcp audit checkpoint`: prove the trail still extends it.
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
    /// A witness's directory (what `audit.witness` names), read directly: prove the trail
    /// extends every checkpoint it holds of this store. The check that catches a rewrite
    /// by whoever holds the store's keys, when the directory is kept out of their reach.
    #[arg(long, value_name = "DIR", conflicts_with = "checkpoint")]
    witness: Option<PathBuf>,
}

/// Arguments of `hcp audit tail`.
#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// How many records (default 10; with `--follow`, 0: only new records).
    #[arg(short = 'n', long = "lines", value_name = "N")]
    n: Option<usize>,
    /// Print a JSON array of the records as stored (with `--follow`: JSON lines).
    #[arg(long)]
    json: bool,
    /// Print each new record as one JSON line, as stored, until SIGINT, SIGTERM or a
    /// closed stdout; it starts at the end of the trail (after the last N with `-n N`), so
    /// a log shipper restarted with it gets no record twice.
    #[arg(long, short = 'f')]
    follow: bool,
}

/// Runs `hcp audit …`.
pub fn run(c: AuditCommand) -> CliResult {
    require_owner("audit")?;
    // `verify` and `tail` write nothing (RUNTIME §6): a store of an earlier version is read
    // as it is, and migrated by the next command that uses the store.
    let reading = || -> Result<hcp_runtime::Runtime, CliError> {
        Ok(hcp_runtime::Runtime::open(
            super::session::open_home_read()?.0,
        ))
    };
    match c {
        AuditCommand::Verify(a) => {
            let rt = reading()?;
            verify(rt.state(), rt.home().root(), a)
        }
        AuditCommand::Tail(a) if a.follow => follow::run(reading()?.state(), a.n.unwrap_or(0)),
        AuditCommand::Tail(a) => tail(reading()?.state(), a),
        AuditCommand::Checkpoint => make_checkpoint(super::exec::runtime()?.state()),
        AuditCommand::Export(a) => export::run(&super::exec::runtime()?, a),
    }
}

/// An audit failure: its code (`audit_unavailable`, `state_unavailable`, `usage` …) and
/// that code's exit status (74, 64).
pub(crate) fn audit_error(e: &AuditError) -> CliError {
    let err = with_causes(CliError::new(e.code(), e.to_string()), e);
    match e.hint() {
        Some(h) => err.hint(h),
        None => err,
    }
}

fn records(n: u64) -> String {
    if n == 1 {
        "1 record".to_owned()
    } else {
        format!("{n} records")
    }
}

fn id_note(id: Option<&str>) -> String {
    id.map(|i| format!(" (`{}`)", safe(i))).unwrap_or_default()
}

/// What becomes of a torn last line, true for the trail as `r` found it: an append cuts it
/// (and records the recovery) only when it may append at all, which it may not while the
/// trail does not match its anchor (RUNTIME §6: every append is refused then, so the
/// evidence is not written over); without the chain key here only the owner appends.
fn torn_then(r: &VerifyReport) -> String {
    match &r.broken {
        Some(b)
            if matches!(
                b.fault,
                Fault::MissingLog
                    | Fault::MissingAnchor
                    | Fault::BadAnchor
                    | Fault::AnchorMismatch
                    | Fault::Truncated
            ) =>
        {
            format!(
                "it is kept as it is: every append is refused (`audit_unavailable`) while the trail does not match its anchor (`{}`, above), so no append recovers it until that is dealt with",
                b.fault.as_str()
            )
        }
        _ if r.chain == ChainCheck::NotChecked => {
            "the owner's next append recovers it (appends need the chain key, not readable here)"
                .to_owned()
        }
        _ => "the next append recovers it".to_owned(),
    }
}

fn render_verify(r: &VerifyReport) -> String {
    render_verify_of(r, None)
}

/// [`render_verify`] of one chain of a fleet's: `elsewhere` names the machine whose chain
/// it is when that is not this machine (its chain key is on that machine alone, so only
/// the links are checked here, whoever runs it).
fn render_verify_of(r: &VerifyReport, elsewhere: Option<&str>) -> String {
    let mut out = String::new();
    match &r.broken {
        // Without the key only the links were checked: never worded as a keyed "intact".
        None if r.chain == ChainCheck::NotChecked && elsewhere.is_some() => {
            out.push_str(&format!(
                "audit trail links intact: {}, head `{}`; not keyed here: its chain key is on machine `{}`; run `hcp audit verify` there for the keyed check\n",
                records(r.records),
                r.head,
                safe(elsewhere.unwrap_or_default())
            ));
        }
        None if r.chain == ChainCheck::NotChecked => out.push_str(&format!(
            "audit trail links intact: {}, head `{}`; not keyed: chain.key is not readable here (read-only view); run `hcp audit verify` as the owner for the keyed check\n",
            records(r.records),
            r.head
        )),
        None if r.chain == ChainCheck::Legacy => out.push_str(&format!(
            "earlier-version trail: {}, plain SHA-256, intact, head `{}`; it gains its keys with a `migrate` record at the next command that uses the store\n",
            records(r.records),
            r.head
        )),
        None => out.push_str(&format!(
            "audit trail intact: {}, head `{}`\n",
            records(r.records),
            r.head
        )),
        Some(b) => {
            let at = if b.line == 0 {
                String::new()
            } else {
                format!(" at line {}{}", b.line, id_note(b.id.as_deref()))
            };
            out.push_str(&format!(
                "audit trail broken{at}: {}: {}\n",
                b.fault.as_str(),
                b.detail
            ));
            if let Some(e) = &b.expected {
                out.push_str(&format!("  expected: `{e}`\n"));
            }
            if let Some(f) = &b.found {
                out.push_str(&format!("  found: `{}`\n", safe(f)));
            }
            out.push_str(&format!(
                "  the {} before it are intact\n",
                records(r.records)
            ));
        }
    }
    if let Some(a) = &r.anchor
        && a.lag > 0
    {
        out.push_str(&format!(
            "  the anchor names {} of them; the last {} were appended by a process killed before it moved the anchor, or before a reboot (not damage)\n",
            a.count, a.lag
        ));
    }
    if r.legacy > 0 {
        out.push_str(&format!(
            "  {} from before write-ahead records and anchors (the next append adopts the trail)\n",
            records(r.legacy)
        ));
    }
    match (r.chain, &r.broken) {
        (ChainCheck::Checked, _) | (ChainCheck::Legacy, None) => {}
        (ChainCheck::NotChecked, _) => out.push_str(
            "  keyed chain: not_checked (the chain key cannot be read here): the records' structure, links and order, the anchor's content and the checkpoint were checked; their keyed hashes and the anchor's MACs were not\n",
        ),
        (ChainCheck::Legacy, Some(_)) => out.push_str(
            "  an earlier-version trail (plain SHA-256): it is migrated only once it verifies\n",
        ),
    }
    if let Some(k) = r.keyed_from
        && k > 1
    {
        out.push_str(&format!(
            "  lines 1 to {} are from before keyed chains (plain SHA-256); the keyed part begins at line {k}, its `migrate` record\n",
            k - 1
        ));
    }
    if let Some(slot) = r.slot_recovered {
        out.push_str(&format!(
            "  slot {slot} of the anchor was torn by a power cut and is recovered from the other (not damage; the next append records it)\n"
        ));
    }
    match &r.against {
        Some(a) => {
            let from = match &a.source {
                CheckpointSource::File => "the checkpoint file".to_owned(),
                CheckpointSource::Witness(w) => format!("the witness ({w})"),
                CheckpointSource::Last => {
                    "the store's last checkpoint (no witness could be read)".to_owned()
                }
            };
            out.push_str(&format!(
                "  the trail extends {from}: {} at {}; {} past it\n",
                records(a.count),
                safe(&a.time),
                records(a.past)
            ));
            if r.witnessed > 1 {
                out.push_str(&format!(
                    "  each of its {} witnessed checkpoints names the record the trail holds at its count\n",
                    r.witnessed
                ));
            }
        }
        None => {
            if let Some(c) = r.checkpoint {
                out.push_str(&format!(
                    "  the trail extends the checkpoint of {}\n",
                    records(c)
                ));
            }
        }
    }
    match r.witnesses_checked.as_slice() {
        [] => out.push_str(&format!("  {NO_WITNESS}\n")),
        [one] => out.push_str(&format!("  witness checked: {}\n", safe(one))),
        many => out.push_str(&format!(
            "  witnesses checked: {}\n",
            many.iter().map(|w| safe(w)).collect::<Vec<_>>().join(", ")
        )),
    }
    for w in &r.retired_witnesses {
        let until = if w.until > 0 {
            format!(" until record {}", w.until)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  note: the witness ({}), the trail's from record {}{until}, was retired by the recorded act that named the next, and its checkpoints are gone ({}): that part of the trail is checked by its chain alone\n",
            safe(&w.witness),
            w.from,
            safe(&w.why)
        ));
    }
    for t in &r.witness_torn {
        if t.recovered {
            out.push_str(&format!(
                "  the witness's {} is a torn line of {} bytes (a crash mid-append, not damage), recovered by the line after it\n",
                safe(&t.place), t.bytes
            ));
        } else {
            out.push_str(&format!(
                "  the witness's {} is a torn last line of {} bytes (a crash mid-append, not damage); the next checkpoint recovers it\n",
                safe(&t.place), t.bytes
            ));
        }
    }
    for n in &r.repairs {
        out.push_str(&format!(
            "  line {}{} records a recovery: a torn tail of {} bytes at byte {} was cut ({}, saved as `{}`)\n",
            n.line,
            id_note(n.id.as_deref()),
            n.repair.bytes,
            n.repair.offset,
            n.repair.sha256,
            safe(&n.repair.saved_as)
        ));
    }
    if let Some(t) = r.torn_tail {
        out.push_str(&format!(
            "  the trail ends with a torn line of {t} bytes (a write cut short by a crash); {}\n",
            torn_then(r)
        ));
    }
    if !r.interrupted.is_empty() {
        out.push_str(&format!(
            "  interrupted: {} with an intent and no outcome (hcp was killed while it ran, or it still runs):\n",
            if r.interrupted.len() == 1 {
                "1 call".to_owned()
            } else {
                format!("{} calls", r.interrupted.len())
            }
        ));
        for i in &r.interrupted {
            out.push_str(&format!(
                "    line {}  {}  {}  {}.{}  {}\n",
                i.line,
                safe(&i.ts),
                safe(i.principal.as_deref().unwrap_or("-")),
                safe(i.pack_id.as_deref().unwrap_or("-")),
                safe(i.verb_key.as_deref().unwrap_or("-")),
                safe(&i.id)
            ));
        }
    }
    if !r.failed_acts.is_empty() {
        out.push_str(&format!(
            "  failed acts: {} recorded and then not made (each `act failed` record names the act's record and why):\n",
            if r.failed_acts.len() == 1 {
                "1 act".to_owned()
            } else {
                format!("{} acts", r.failed_acts.len())
            }
        ));
        for f in &r.failed_acts {
            out.push_str(&format!(
                "    line {}  {}  {}  of record {}  {}\n",
                f.line,
                safe(&f.ts),
                safe(&f.act),
                f.seq.map_or_else(|| "-".to_owned(), |s| s.to_string()),
                safe(&f.code)
            ));
        }
    }
    if !r.interrupted_acts.is_empty() {
        out.push_str(&format!(
            "  interrupted: {} recorded and never completed (hcp was killed between the record and the change, or it still runs; the change may or may not be made):\n",
            if r.interrupted_acts.len() == 1 {
                "1 act".to_owned()
            } else {
                format!("{} acts", r.interrupted_acts.len())
            }
        ));
        for i in &r.interrupted_acts {
            out.push_str(&format!(
                "    line {}  {}  {}  {}  {}\n",
                i.line,
                safe(&i.ts),
                safe(i.actor.as_deref().unwrap_or("-")),
                safe(&i.act),
                safe(&i.id)
            ));
        }
    }
    out
}

/// A checkpoint file: one checkpoint (the line `hcp audit checkpoint` printed), or a
/// witness's file of them (`DIR/<store id>.checkpoints`, one a line, a torn last line
/// allowed).
fn read_checkpoint(path: &std::path::Path) -> Result<Held, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::new(
            hcp_model::Code::BadCheckpoint,
            format!("cannot read the checkpoint `{}`: {e}", path.display()),
        )
    })?;
    let hint = "a checkpoint file is the line `hcp audit checkpoint` printed, or a witness's file of them, unchanged";
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    if lines <= 1 {
        let c = Checkpoint::parse(&text).map_err(|e| {
            CliError::new(e.code(), format!("`{}` is {e}", path.display())).hint(hint)
        })?;
        return Ok(Held {
            checkpoints: vec![(0, c)],
            ..Held::default()
        });
    }
    let held = Held::parse(&text, Some(path.to_path_buf()), None, None);
    if let Some((line, why)) = &held.forged {
        return Err(CliError::new(
            hcp_model::Code::BadCheckpoint,
            format!("{}: {why}", held.place(*line)),
        )
        .hint(hint));
    }
    if held.checkpoints.is_empty() {
        return Err(CliError::new(
            hcp_model::Code::BadCheckpoint,
            format!("`{}` holds no checkpoint", path.display()),
        )
        .hint(hint));
    }
    Ok(held)
}

/// `--witness DIR`: every checkpoint the witness directory `dir` holds of this store (its
/// file `DIR/<store id>.checkpoints`, the store's id from `store.json`), read as the
/// witness reads it. A directory that cannot be read is `witness_unavailable`; one that
/// holds no checkpoint of this store (no file, or an empty one) is `checkpoint_mismatch`,
/// naming the other stores' files it holds: a store made again by whoever holds its keys
/// has another id.
fn read_witness(
    root: &std::path::Path,
    dir: &std::path::Path,
) -> Result<(Held, CheckpointSource), CliError> {
    use hcp_store::audit::witness::{DIR_SUFFIX, DirWitness, Witness};
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let w = DirWitness::new(&dir);
    let others = || -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()
                            .and_then(|n| n.strip_suffix(DIR_SUFFIX))
                            .map(str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    };
    let hint = "point `--witness` at the directory `audit.witness` named when the checkpoints were taken; a store made again by whoever holds its keys has a new id, and none of its checkpoints are there";
    let Some(store) = hcp_store::made::Marker::read(root)
        .ok()
        .flatten()
        .map(|m| m.store_id)
    else {
        return Err(CliError::new(
            hcp_model::Code::CheckpointMismatch,
            format!(
                "`{}` names no store id, so no file of the witness `{}` can be this store's (it holds checkpoints of: {})",
                root.join("store.json").display(),
                dir.display(),
                listed(&others())
            ),
        )
        .hint("`hcp audit verify` without `--witness` says what is wrong with the store"));
    };
    let held = w.held(&store, None).map_err(|e| {
        CliError::new(hcp_model::Code::WitnessUnavailable, e.to_string()).hint(
            "`--witness DIR` names a witness's directory, which must exist and be readable by this user",
        )
    })?;
    if held.checkpoints.is_empty() && held.forged.is_none() {
        let file = w.file(&store);
        let why = if file.exists() {
            format!("`{}` holds none", file.display())
        } else {
            format!("`{}` does not exist", file.display())
        };
        let rest: Vec<String> = others().into_iter().filter(|i| *i != store).collect();
        return Err(CliError::new(
            hcp_model::Code::CheckpointMismatch,
            format!(
                "the witness `{}` holds no checkpoint of this store (`{store}`): {why}; it holds checkpoints of: {}",
                dir.display(),
                listed(&rest)
            ),
        )
        .hint(hint));
    }
    Ok((held, CheckpointSource::Witness(w.describe())))
}

/// `` `a`, `b` `` or `no other store`.
fn listed(ids: &[String]) -> String {
    if ids.is_empty() {
        return "no other store".to_owned();
    }
    ids.iter()
        .map(|i| format!("`{}`", safe(i)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `hcp audit verify` says when no witness was checked (RUNTIME §6).
pub(crate) const NO_WITNESS: &str = "no witness checked: a rewrite by whoever holds the store's keys is caught only against a witness kept out of their reach — run `hcp audit verify --witness DIR` with that witness's directory (docs/DESIGN.md, \"What the witness defends against\")";

/// The JSON of `hcp audit verify --json`: the one trail's report (the file store) with
/// `ok`; for several chains, `{"ok", "records", "interrupted", "chains": [{"machine", …}]}`.
fn verify_json(r: &AuditReport) -> Value {
    let mut v = match r.chains.as_slice() {
        [one] if one.machine.is_none() => serde_json::to_value(&one.report),
        _ => serde_json::to_value(r).map(|mut v| {
            if let Value::Object(m) = &mut v {
                m.insert("records".into(), json!(r.records()));
                m.insert("interrupted".into(), json!(r.interrupted()));
            }
            v
        }),
    }
    .unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("ok".into(), Value::Bool(r.is_clean()));
        // Whether any chain was checked against a witness, said in words when none was.
        let checked = r
            .chains
            .iter()
            .any(|c| !c.report.witnesses_checked.is_empty());
        if !checked {
            m.insert("witness_note".into(), json!(NO_WITNESS));
        }
    }
    // `keyed`: whether each chain's keyed hashes were checked under its key (`false`
    // without the key, or for a trail of an earlier version): a link check is never read
    // as a keyed one.
    let keyed = |c: &hcp_store::audit::ChainVerify| c.report.chain == ChainCheck::Checked;
    match (r.chains.as_slice(), &mut v) {
        ([one], Value::Object(m)) if one.machine.is_none() => {
            m.insert("keyed".into(), Value::Bool(keyed(one)));
        }
        (chains, Value::Object(m)) => {
            if let Some(Value::Array(list)) = m.get_mut("chains") {
                for (c, j) in chains.iter().zip(list.iter_mut()) {
                    if let Value::Object(o) = j {
                        o.insert("keyed".into(), Value::Bool(keyed(c)));
                    }
                }
            }
            m.insert(
                "keyed".into(),
                Value::Bool(!chains.is_empty() && chains.iter().all(keyed)),
            );
        }
        _ => {}
    }
    v
}

fn verify(state: &dyn State, root: &std::path::Path, a: VerifyArgs) -> CliResult {
    let cp = match (&a.checkpoint, &a.witness) {
        (Some(file), _) => Some((read_checkpoint(file)?, CheckpointSource::File)),
        (None, Some(dir)) => Some(read_witness(root, dir)?),
        (None, None) => None,
    };
    let r = match cp {
        Some((held, source)) => state.audit_verify_held(&held, source),
        None => state.audit_verify(None),
    }
    .map_err(|e| audit_error(&e))?;
    if a.json {
        print(&format!("{}\n", verify_json(&r)));
    } else {
        let mut out = String::new();
        let here = state.machine();
        for c in &r.chains {
            let elsewhere = c.machine.as_deref().filter(|m| here.as_deref() != Some(*m));
            match &c.machine {
                Some(m) if elsewhere.is_none() => {
                    out.push_str(&format!("machine `{}` (this machine):\n", safe(m)));
                }
                Some(m) => out.push_str(&format!("machine `{}`:\n", safe(m))),
                None => {}
            }
            out.push_str(&render_verify_of(&c.report, elsewhere));
        }
        if r.chains.is_empty() {
            out.push_str(&render_verify(&VerifyReport::default()));
        }
        print(&out);
    }
    Ok(if r.is_clean() {
        exit::OK
    } else {
        exit::REFUSED
    })
}

fn make_checkpoint(state: &dyn State) -> CliResult {
    let r = state.audit_verify(None).map_err(|e| audit_error(&e))?;
    if let Some(c) = r.first_broken()
        && let Some(b) = &c.report.broken
    {
        return Err(CliError::new(
            b.fault.code(),
            format!(
                "the audit trail is broken at line {}, so it is not checkpointed: {}",
                b.line, b.detail
            ),
        )
        .hint("`hcp audit verify` says more"));
    }
    // A fleet's chains are checkpointed one by one, each by its machine (docs/DESIGN.md
    // "Checkpoints of a fleet"): this machine's.
    let machine = state.machine();
    let mine = r
        .chains
        .iter()
        .find(|c| c.machine.is_none() || c.machine.as_deref() == machine.as_deref());
    let (records, head) = match mine {
        Some(one) => (one.report.records, one.report.head.clone()),
        None => (0, hcp_store::audit::GENESIS.to_owned()),
    };
    let c = state
        .audit_checkpoint(records, &head, jiff::Timestamp::now())
        .map_err(|e| audit_error(&e))?;
    print(&c.to_line());
    Ok(exit::OK)
}

/// A record field as one line of plain text: control characters (a newline that would
/// forge a second record, a terminal escape) are shown escaped.
fn safe(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
                c.escape_unicode().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn opt(s: &Option<String>) -> String {
    safe(s.as_deref().unwrap_or("-"))
}

fn render_record(r: &Record, interrupted: bool) -> String {
    if r.kind() == Kind::Authority {
        let text = |k: &str| r.extra.get(k).and_then(Value::as_str).map(safe);
        // What changed as `key=value` pairs (strings bare, the rest as JSON).
        let changed = match r.extra.get("changed") {
            Some(Value::Object(o)) => o
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{}={}", safe(k), safe(s)),
                    v => format!("{}={}", safe(k), safe(&v.to_string())),
                })
                .collect::<Vec<_>>()
                .join(" "),
            Some(c) => safe(&c.to_string()),
            None => String::new(),
        };
        let actor = match (text("actor"), r.extra.get("uid").and_then(Value::as_u64)) {
            (Some(a), Some(uid)) => format!("{a} (uid {uid})"),
            (Some(a), None) => a,
            (None, _) => "-".into(),
        };
        let act = text("act").unwrap_or_else(|| "-".into());
        let act = if interrupted {
            format!("{act} (interrupted)")
        } else {
            act
        };
        return format!(
            "{}  {:<8}  {}  {}  {}  {}\n",
            safe(&r.ts),
            "act",
            actor,
            act,
            changed,
            safe(&r.id)
        );
    }
    let target = match (&r.pack_id, &r.verb_key) {
        (Some(p), Some(v)) => format!("{}.{}", safe(p), safe(v)),
        (None, Some(v)) => safe(v),
        (Some(p), None) => safe(p),
        (None, None) => "-".into(),
    };
    let kind = r.kind();
    let label = match kind {
        Kind::Refusal => "deny",
        Kind::Event => "allow",
        k => k.as_str(),
    };
    let what = match kind {
        Kind::Recovery => {
            let bytes = r
                .extra
                .get("repair")
                .and_then(|x| x.get("bytes"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            format!("a torn tail of {bytes} bytes was cut")
        }
        Kind::Intent if interrupted => "interrupted".into(),
        Kind::Intent => "admitted".into(),
        _ => match (&r.code, r.exit_code) {
            (Some(c), _) => safe(c),
            (None, Some(x)) => format!("exit={x}"),
            (None, None) => "-".into(),
        },
    };
    let dur = r
        .duration_ms
        .map(|d| format!("{d}ms"))
        .unwrap_or_else(|| "-".into());
    let truncated = if r.extra.get("truncated") == Some(&Value::Bool(true)) {
        "  truncated"
    } else {
        ""
    };
    format!(
        "{}  {:<8}  {}  {}  {}  {}{truncated}  {}\n",
        safe(&r.ts),
        label,
        opt(&r.principal),
        target,
        what,
        dur,
        safe(&r.id)
    )
}

fn tail(state: &dyn State, a: TailArgs) -> CliResult {
    let (lines, torn) = state
        .audit_tail(a.n.unwrap_or(10))
        .map_err(|e| audit_error(&e))?;
    if a.json {
        let v: Vec<Value> = lines
            .iter()
            .map(|l| match serde_json::from_slice::<Value>(l) {
                Ok(v) => v,
                Err(e) => json!({ "unparseable": e.to_string() }),
            })
            .collect();
        print(&format!("{}\n", Value::Array(v)));
        warn_torn(torn);
        return Ok(exit::OK);
    }
    let lines: Vec<TailLine> = lines
        .iter()
        .map(|l| match serde_json::from_slice::<Record>(l) {
            Ok(r) => TailLine::Record(Box::new(r)),
            Err(e) => TailLine::Unparseable {
                reason: e.to_string(),
            },
        })
        .collect();
    {
        // An intent shown without a later outcome among the lines shown (which run to
        // the end of the trail) has none: its call was interrupted, or still runs.
        let closed: std::collections::BTreeSet<&str> = lines
            .iter()
            .filter_map(|l| match l {
                TailLine::Record(r) if r.kind() == Kind::Outcome => r.intent.as_deref(),
                _ => None,
            })
            .collect();
        // So is an act's intent (`phase: intent`) without its `act made` / `act failed`.
        let completed: std::collections::BTreeSet<u64> = lines
            .iter()
            .filter_map(|l| match l {
                TailLine::Record(r) if is_completion(r) => r
                    .extra
                    .get("changed")
                    .and_then(|c| c.get("seq"))
                    .and_then(Value::as_u64),
                _ => None,
            })
            .collect();
        let mut out = String::new();
        for l in &lines {
            match l {
                TailLine::Record(r) => {
                    let open = (r.kind() == Kind::Intent && !closed.contains(r.id.as_str()))
                        || (r.kind() == Kind::Authority
                            && r.extra.get("phase").and_then(Value::as_str)
                                == Some(hcp_store::audit::PHASE_INTENT)
                            && r.seq.is_some_and(|s| !completed.contains(&s)));
                    out.push_str(&render_record(r, open));
                }
                TailLine::Unparseable { reason } => {
                    out.push_str(&format!("(not a record: {})\n", safe(reason)));
                }
            }
        }
        print(&out);
    }
    warn_torn(torn);
    Ok(exit::OK)
}

/// Whether `r` completes an act's intent (`act made`, `act failed`).
fn is_completion(r: &Record) -> bool {
    r.kind() == Kind::Authority
        && matches!(
            r.extra.get("act").and_then(Value::as_str),
            Some(hcp_store::audit::ACT_MADE | hcp_store::audit::ACT_FAILED)
        )
}

fn warn_torn(torn: u64) {
    if torn > 0 {
        eprintln!(
            "warning: the trail ends with a torn line of {torn} bytes; `hcp audit verify` says more"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{render_verify, safe, verify_json};
    use hcp_store::audit::{AuditReport, ChainCheck, VerifyReport};

    fn report(chain: ChainCheck) -> VerifyReport {
        VerifyReport {
            records: 3,
            head: "hmac-sha256:0123".into(),
            chain,
            ..VerifyReport::default()
        }
    }

    #[test]
    fn a_verdict_without_the_key_or_of_an_earlier_version_is_not_a_keyed_intact() {
        let keyless = report(ChainCheck::NotChecked);
        insta::assert_snapshot!("verify_not_keyed", render_verify(&keyless));
        let earlier = VerifyReport {
            head: "sha256:4567".into(),
            ..report(ChainCheck::Legacy)
        };
        insta::assert_snapshot!("verify_earlier_version", render_verify(&earlier));
        for (r, keyed) in [
            (keyless, false),
            (earlier, false),
            (report(ChainCheck::Checked), true),
        ] {
            let v = verify_json(&AuditReport::single(r));
            assert_eq!(v["keyed"], serde_json::Value::Bool(keyed), "{v}");
        }
    }

    #[test]
    fn record_fields_cannot_forge_lines_or_drive_the_terminal() {
        let forged = "probe.cwd\n2026-11-29T21:59:50.000Z  allow  owner  commit";
        assert!(!safe(forged).contains('\n'));
        assert!(!safe("\u{1b}]0;pwned\u{7}\u{1b}[2J").contains('\u{1b}'));
        assert!(!safe("a\u{202e}b").contains('\u{202e}'));
        assert_eq!(safe("mail.send"), "mail.send");
    }
}
