//! `hcp-example-ledger`: the gated-write CLI of the `ledger` gold pack.
//!
//! It keeps an append-only journal, `ledger.jsonl`, in its current directory (the sandbox
//! working directory when hcp runs it in land `local`): one JSON object a line,
//! `{"seq", "account", "amount", "amount_cents", "memo"}`.
//!
//! ```text
//! ledger post ACCOUNT AMOUNT MEMO --confirm [--json]    append one entry
//! ledger post ACCOUNT AMOUNT MEMO --dry-run [--json]    show what post would append; persists nothing
//! ledger validate ACCOUNT AMOUNT MEMO [--json]          check a prospective entry; reads nothing
//! ledger balance [ACCOUNT] [--json]                     balances per account and the total
//! ledger list [--account ACCOUNT] [--limit N] [--json]  entries, oldest first (the last N)
//! ```
//!
//! ACCOUNT is lowercase words joined by `:` (`assets:cash`); AMOUNT is a decimal string
//! with at most two decimals, optionally negative, never zero (`12`, `12.5`, `-0.75`); MEMO
//! is 1 to 200 characters without control characters. A negative amount needs `--` before
//! the positionals.

use hcp_examples::{Failure, Opt, Outcome, out_json, out_line, parse_args, parse_count, run};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::process::ExitCode;

const USAGE: &str = "usage: ledger post ACCOUNT AMOUNT MEMO (--confirm | --dry-run) [--json]
       ledger validate ACCOUNT AMOUNT MEMO [--json]
       ledger balance [ACCOUNT] [--json]
       ledger list [--account ACCOUNT] [--limit N] [--json]
(put `--` before the positionals when AMOUNT is negative)";

/// The journal's file name, in the current directory.
const JOURNAL: &str = "ledger.jsonl";
/// The largest absolute amount, in cents (ten billion).
const MAX_CENTS: i64 = 1_000_000_000_000;
/// The longest memo, characters.
const MAX_MEMO: usize = 200;
/// The longest account name, characters.
const MAX_ACCOUNT: usize = 64;

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    seq: u64,
    account: String,
    amount: String,
    amount_cents: i64,
    memo: String,
}

fn main() -> ExitCode {
    run(USAGE, dispatch)
}

fn dispatch(args: Vec<String>) -> Outcome {
    let Some((cmd, rest)) = args.split_first() else {
        return Err(Failure::usage("missing command"));
    };
    match cmd.as_str() {
        "post" => post(rest),
        "validate" => validate(rest),
        "balance" => balance(rest),
        "list" => list(rest),
        "help" | "--help" => out_line(USAGE),
        other => Err(Failure::usage(format!("unknown command `{other}`"))),
    }
}

fn check_account(account: &str) -> Result<(), String> {
    let segment_ok = |s: &str| {
        let mut c = s.chars();
        matches!(c.next(), Some(first) if first.is_ascii_lowercase())
            && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    };
    if account.len() > MAX_ACCOUNT || !account.split(':').all(segment_ok) {
        return Err(format!(
            "account `{account}` must be lowercase words joined by `:` (like `assets:cash`), at most {MAX_ACCOUNT} characters"
        ));
    }
    Ok(())
}

/// Parses a decimal amount into cents, strictly.
fn parse_amount(text: &str) -> Result<i64, String> {
    let bad = || {
        format!(
            "amount `{text}` must be a decimal like `12`, `12.5` or `-0.75` (at most two decimals, no sign `+`, no leading zeros, no exponent)"
        )
    };
    let (negative, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text),
    };
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || (int.len() > 1 && int.starts_with('0')) {
        return Err(bad());
    }
    if let Some(f) = frac
        && (!digits(f) || f.len() > 2)
    {
        return Err(bad());
    }
    if int.len() > 13 {
        return Err(format!("amount `{text}` is too large"));
    }
    let whole: i64 = int.parse().map_err(|_| bad())?;
    let cents: i64 = match frac {
        None => 0,
        Some(f) if f.len() == 1 => f.parse::<i64>().map_err(|_| bad())? * 10,
        Some(f) => f.parse::<i64>().map_err(|_| bad())?,
    };
    let total = whole
        .checked_mul(100)
        .and_then(|w| w.checked_add(cents))
        .ok_or_else(|| format!("amount `{text}` is too large"))?;
    if total == 0 {
        return Err(format!("amount `{text}` is zero"));
    }
    if total > MAX_CENTS {
        return Err(format!("amount `{text}` is too large"));
    }
    Ok(if negative { -total } else { total })
}

/// Formats cents as a decimal string with two decimals.
fn format_cents(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

fn check_memo(memo: &str) -> Result<(), String> {
    if memo.trim().is_empty() {
        return Err("memo may not be empty".to_owned());
    }
    if memo.chars().count() > MAX_MEMO {
        return Err(format!("memo is longer than {MAX_MEMO} characters"));
    }
    if memo.chars().any(char::is_control) {
        return Err("memo may not hold control characters (newlines, tabs)".to_owned());
    }
    Ok(())
}

/// Validates a prospective entry, collecting every problem.
fn prospective(account: &str, amount: &str, memo: &str) -> Result<i64, Vec<String>> {
    let mut errors = Vec::new();
    if let Err(e) = check_account(account) {
        errors.push(e);
    }
    let cents = parse_amount(amount).map_err(|e| errors.push(e)).ok();
    if let Err(e) = check_memo(memo) {
        errors.push(e);
    }
    match cents {
        Some(c) if errors.is_empty() => Ok(c),
        _ => Err(errors),
    }
}

fn entry_json(e: &Entry) -> Value {
    json!({
        "seq": e.seq,
        "account": e.account,
        "amount": e.amount,
        "amount_cents": e.amount_cents,
        "memo": e.memo,
    })
}

/// Parses journal text, checking every line.
fn parse_journal(text: &str) -> Result<Vec<Entry>, Failure> {
    let mut entries: Vec<Entry> = Vec::new();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(Failure::fail(format!(
            "the journal `{JOURNAL}` is damaged: its last line is incomplete"
        )));
    }
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let damaged = |why: String| {
            Failure::fail(format!(
                "the journal `{JOURNAL}` is damaged at line {n}: {why}"
            ))
        };
        let e: Entry = serde_json::from_str(line).map_err(|e| damaged(e.to_string()))?;
        let expected_seq = entries.last().map_or(1, |p| p.seq + 1);
        if e.seq != expected_seq {
            return Err(damaged(format!(
                "seq {} where {expected_seq} was expected",
                e.seq
            )));
        }
        check_account(&e.account).map_err(damaged)?;
        check_memo(&e.memo).map_err(damaged)?;
        let cents = parse_amount(&e.amount).map_err(damaged)?;
        if cents != e.amount_cents || format_cents(cents) != e.amount {
            return Err(damaged("amount and amount_cents disagree".to_owned()));
        }
        entries.push(e);
    }
    Ok(entries)
}

/// Reads the journal; a missing journal is empty.
fn read_journal() -> Result<Vec<Entry>, Failure> {
    match std::fs::read_to_string(JOURNAL) {
        Ok(text) => parse_journal(&text),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Failure::io(format!("cannot read `{JOURNAL}`"), &e)),
    }
}

fn balances(entries: &[Entry]) -> BTreeMap<&str, i64> {
    let mut out: BTreeMap<&str, i64> = BTreeMap::new();
    for e in entries {
        *out.entry(e.account.as_str()).or_default() += e.amount_cents;
    }
    out
}

fn three_positionals(p: &hcp_examples::Parsed) -> Result<[&str; 3], Failure> {
    match p.exactly(&["account", "amount", "memo"])? {
        [a, b, c] => Ok([a.as_str(), b.as_str(), c.as_str()]),
        _ => Err(Failure::usage("expected <account> <amount> <memo>")),
    }
}

fn invalid(errors: &[String]) -> Failure {
    Failure::fail(errors.join("; "))
}

fn post(args: &[String]) -> Outcome {
    let p = parse_args(
        args,
        &[
            Opt::switch("json"),
            Opt::switch("confirm"),
            Opt::switch("dry-run"),
        ],
    )?;
    let [account, amount, memo] = three_positionals(&p)?;
    let cents = prospective(account, amount, memo).map_err(|e| invalid(&e))?;
    if p.has("dry-run") {
        // Nothing is created, locked or written: the journal is only read, if it exists.
        let entries = read_journal()?;
        let entry = Entry {
            seq: entries.last().map_or(1, |e| e.seq + 1),
            account: account.to_owned(),
            amount: format_cents(cents),
            amount_cents: cents,
            memo: memo.to_owned(),
        };
        let before = balances(&entries).get(account).copied().unwrap_or(0);
        let after = format_cents(before + cents);
        if p.json() {
            return out_json(&json!({
                "dry_run": true,
                "would_post": entry_json(&entry),
                "balance_after": after,
            }));
        }
        return out_line(&format!(
            "dry run: would post #{} {} {} \"{}\"; {} would be {after}; nothing was written",
            entry.seq, entry.account, entry.amount, entry.memo, entry.account
        ));
    }
    if !p.has("confirm") {
        return Err(Failure::refused(
            "refusing to post without --confirm (use --dry-run to preview)",
        ));
    }
    let (entry, after) = append(account, cents, memo)?;
    if p.json() {
        return out_json(&json!({ "posted": entry_json(&entry), "balance": after }));
    }
    out_line(&format!(
        "posted #{} {} {} \"{}\"; {} is now {after}",
        entry.seq, entry.account, entry.amount, entry.memo, entry.account
    ))
}

/// Appends one entry under an exclusive lock on the journal, so concurrent posts get
/// distinct sequence numbers.
fn append(account: &str, cents: i64, memo: &str) -> Result<(Entry, String), Failure> {
    let io = |e: std::io::Error| Failure::io(format!("cannot write `{JOURNAL}`"), &e);
    let mut file: File = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(JOURNAL)
        .map_err(io)?;
    file.lock().map_err(io)?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io)?;
    let entries = parse_journal(&text)?;
    let entry = Entry {
        seq: entries.last().map_or(1, |e| e.seq + 1),
        account: account.to_owned(),
        amount: format_cents(cents),
        amount_cents: cents,
        memo: memo.to_owned(),
    };
    let mut line = serde_json::to_string(&entry)
        .map_err(|e| Failure::fail(format!("cannot encode the entry: {e}")))?;
    line.push('\n');
    file.write_all(line.as_bytes()).map_err(io)?;
    file.sync_data().map_err(io)?;
    let before = balances(&entries).get(account).copied().unwrap_or(0);
    Ok((entry, format_cents(before + cents)))
}

fn validate(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json")])?;
    let [account, amount, memo] = three_positionals(&p)?;
    match prospective(account, amount, memo) {
        Ok(cents) => {
            if p.json() {
                out_json(&json!({
                    "valid": true,
                    "entry": {
                        "account": account,
                        "amount": format_cents(cents),
                        "amount_cents": cents,
                        "memo": memo,
                    }
                }))
            } else {
                out_line(&format!(
                    "valid: {account} {} \"{memo}\"",
                    format_cents(cents)
                ))
            }
        }
        Err(errors) => {
            if p.json() {
                out_json(&json!({ "valid": false, "errors": errors }))?;
            }
            Err(invalid(&errors))
        }
    }
}

fn balance(args: &[String]) -> Outcome {
    let p = parse_args(args, &[Opt::switch("json")])?;
    let account = p.at_most(1)?.first();
    if let Some(a) = account {
        check_account(a).map_err(Failure::fail)?;
    }
    let entries = read_journal()?;
    let all = balances(&entries);
    let rows: Vec<(&str, i64)> = match account {
        Some(a) => vec![(a.as_str(), all.get(a.as_str()).copied().unwrap_or(0))],
        None => all.iter().map(|(k, v)| (*k, *v)).collect(),
    };
    let total: i64 = rows.iter().map(|(_, v)| v).sum();
    if p.json() {
        let accounts: Vec<Value> = rows
            .iter()
            .map(|(a, c)| json!({ "account": a, "balance": format_cents(*c), "balance_cents": c }))
            .collect();
        return out_json(&json!({
            "accounts": accounts,
            "total": format_cents(total),
            "total_cents": total,
            "entries": entries.len(),
        }));
    }
    if rows.is_empty() {
        return out_line("no entries");
    }
    for (a, c) in &rows {
        out_line(&format!("{a:<24} {:>14}", format_cents(*c)))?;
    }
    out_line(&format!("{:<24} {:>14}", "total", format_cents(total)))
}

fn list(args: &[String]) -> Outcome {
    let p = parse_args(
        args,
        &[
            Opt::switch("json"),
            Opt::value("account"),
            Opt::value("limit"),
        ],
    )?;
    p.exactly(&[])?;
    if let Some(a) = p.value("account") {
        check_account(a).map_err(Failure::fail)?;
    }
    let limit = p
        .value("limit")
        .map(|l| parse_count(l, "limit"))
        .transpose()?;
    let entries = read_journal()?;
    let mut chosen: Vec<&Entry> = entries
        .iter()
        .filter(|e| p.value("account").is_none_or(|a| e.account == a))
        .collect();
    if let Some(n) = limit {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let skip = chosen.len().saturating_sub(n);
        chosen.drain(..skip);
    }
    if p.json() {
        let list: Vec<Value> = chosen.iter().map(|e| entry_json(e)).collect();
        return out_json(&json!({ "entries": list }));
    }
    if chosen.is_empty() {
        return out_line("no entries");
    }
    for e in chosen {
        out_line(&format!(
            "#{:<4} {:<24} {:>14}  {}",
            e.seq, e.account, e.amount, e.memo
        ))?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_strict() {
        assert_eq!(parse_amount("12").unwrap(), 1200);
        assert_eq!(parse_amount("12.5").unwrap(), 1250);
        assert_eq!(parse_amount("-0.75").unwrap(), -75);
        assert_eq!(parse_amount("0.01").unwrap(), 1);
        for bad in [
            "",
            "0",
            "0.00",
            "-0",
            "+1",
            "01",
            "1.",
            ".5",
            "1.234",
            "1e3",
            "1,000",
            " 1",
            "1 ",
            "--1",
            "-",
            "NaN",
            "99999999999999",
        ] {
            assert!(parse_amount(bad).is_err(), "{bad}");
        }
        assert_eq!(format_cents(-75), "-0.75");
        assert_eq!(format_cents(120_000), "1200.00");
    }

    #[test]
    fn accounts_are_strict() {
        assert!(check_account("assets:cash").is_ok());
        assert!(check_account("expenses:food-2").is_ok());
        for bad in ["", "Assets", "a::b", ":a", "a:", "a b", "1a", "a/b"] {
            assert!(check_account(bad).is_err(), "{bad}");
        }
    }
}
