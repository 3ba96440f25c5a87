//! `hcp audit verify | tail` (RUNTIME §6), owner only: the trail records every
//! principal's calls, so it is the owner's to read.

use super::session::{open_home, print, require_owner, with_causes};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_store::audit::{AuditError, AuditLog, BreakKind, Record, TailLine, VerifyReport};
use serde_json::{Value, json};

/// Subcommands of `hcp audit`.
#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Walk the hash chain and name the first broken record (exit 0 intact, 1 broken).
    Verify(VerifyArgs),
    /// Show the latest records, oldest first.
    Tail(TailArgs),
}

/// Arguments of `hcp audit verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Print the report as a JSON object.
    #[arg(long)]
    json: bool,
}

/// Arguments of `hcp audit tail`.
#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// How many records.
    #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 10)]
    n: usize,
    /// Print a JSON array of the records as stored.
    #[arg(long)]
    json: bool,
}

/// Runs `hcp audit …`.
pub fn run(c: AuditCommand) -> CliResult {
    require_owner("audit")?;
    let log = AuditLog::new(&open_home()?);
    match c {
        AuditCommand::Verify(a) => verify(&log, a),
        AuditCommand::Tail(a) => tail(&log, a),
    }
}

fn audit_error(e: &AuditError) -> CliError {
    let exit = match e {
        AuditError::Damaged { .. } => exit::REFUSED,
        _ => exit::EX_IOERR,
    };
    let mut c = CliError::new(hcp_runtime::refusal::code_of(e.code()), e.to_string());
    c.exit = exit;
    with_causes(c, e)
}

fn what_broke(kind: BreakKind) -> &'static str {
    match kind {
        BreakKind::Unparseable => "the line is not an audit record",
        BreakKind::HashMismatch => "its hash does not match its content: the record was edited",
        BreakKind::PrevMismatch => {
            "its `prev` is not the previous record's hash: a record before it was removed, \
             inserted or moved"
        }
        BreakKind::TornTail => {
            "the last line has no newline: a write was cut short; the next append cuts it \
             off, saves it and records a repair"
        }
    }
}

fn render_verify(r: &VerifyReport) -> String {
    let mut out = String::new();
    let records = |n: u64| {
        if n == 1 {
            "1 record".to_owned()
        } else {
            format!("{n} records")
        }
    };
    match &r.broken {
        None => out.push_str(&format!(
            "audit trail intact: {}, head `{}`\n",
            records(r.records),
            r.head
        )),
        Some(b) => {
            let id =
                b.id.as_deref()
                    .map(|i| format!(" (`{i}`)"))
                    .unwrap_or_default();
            out.push_str(&format!(
                "audit trail broken at line {}{id}: {}: {}\n",
                b.line,
                b.kind.as_str(),
                what_broke(b.kind)
            ));
            if let Some(e) = &b.expected {
                out.push_str(&format!("  expected: `{e}`\n"));
            }
            if let Some(f) = &b.found {
                out.push_str(&format!("  found: `{f}`\n"));
            }
            out.push_str(&format!(
                "  the {} before it are intact\n",
                records(r.records)
            ));
        }
    }
    for n in &r.repairs {
        let id =
            n.id.as_deref()
                .map(|i| format!(" (`{i}`)"))
                .unwrap_or_default();
        out.push_str(&format!(
            "  line {}{id} follows a repair: a torn tail of {} bytes at byte {} was cut ({}, saved as `{}`)\n",
            n.line, n.repair.bytes, n.repair.offset, n.repair.sha256, n.repair.saved_as
        ));
    }
    out
}

fn verify(log: &AuditLog, a: VerifyArgs) -> CliResult {
    let r = log.verify().map_err(|e| audit_error(&e))?;
    if a.json {
        let mut v = serde_json::to_value(&r).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("ok".into(), Value::Bool(r.is_clean()));
        }
        print(&format!("{v}\n"));
    } else {
        print(&render_verify(&r));
    }
    Ok(if r.is_clean() {
        exit::OK
    } else {
        exit::REFUSED
    })
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

fn render_record(r: &Record) -> String {
    let outcome = match (&r.code, r.exit_code) {
        (Some(c), _) => safe(c),
        (None, Some(x)) => format!("exit={x}"),
        (None, None) => "-".into(),
    };
    let target = match &r.pack_id {
        Some(p) => format!("{}.{}", safe(p), safe(&r.verb_key)),
        None => safe(&r.verb_key),
    };
    format!(
        "{}  {:<5}  {}  {}  {}  {}ms  {}\n",
        r.ts,
        r.decision.as_str(),
        safe(&r.principal),
        target,
        outcome,
        r.duration_ms,
        r.id
    )
}

fn tail(log: &AuditLog, a: TailArgs) -> CliResult {
    let (lines, torn) = log.tail(a.n).map_err(|e| audit_error(&e))?;
    if a.json {
        let v: Vec<Value> = lines
            .iter()
            .map(|l| match l {
                TailLine::Record(r) => serde_json::to_value(r).unwrap_or(Value::Null),
                TailLine::Unparseable { reason } => json!({ "unparseable": reason }),
            })
            .collect();
        print(&format!("{}\n", Value::Array(v)));
    } else {
        let mut out = String::new();
        for l in &lines {
            match l {
                TailLine::Record(r) => out.push_str(&render_record(r)),
                TailLine::Unparseable { reason } => {
                    out.push_str(&format!("(not a record: {reason})\n"));
                }
            }
        }
        print(&out);
    }
    if torn > 0 {
        eprintln!(
            "warning: the trail ends with a torn line of {torn} bytes; `hcp audit verify` says more"
        );
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::safe;

    #[test]
    fn record_fields_cannot_forge_lines_or_drive_the_terminal() {
        let forged = "probe.cwd\n2026-11-29T21:59:50.000Z  allow  owner  commit";
        assert!(!safe(forged).contains('\n'));
        assert!(!safe("\u{1b}]0;pwned\u{7}\u{1b}[2J").contains('\u{1b}'));
        assert!(!safe("a\u{202e}b").contains('\u{202e}'));
        assert_eq!(safe("mail.send"), "mail.send");
    }
}
