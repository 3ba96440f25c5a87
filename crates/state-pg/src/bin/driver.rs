//! The fleet tests' driver (`tests/fleet.rs`): one process of one "machine" (its own
//! `--home`, hence its own machine id) calling [`PgState::admit`] like `hcp exec` would,
//! and recording each call's outcome. Not a user command.
//!
//! ```text
//! hcp-state-pg-driver --url URL --schema S --home DIR --session SHA256 --pack ID
//!     [--count N] [--now-ms MS] [--rate N] [--budget N] [--approval] [--wait]
//!     [--pause-on-error]
//! ```
//!
//! `--wait` prints `ready` once connected, then reads one line from stdin before the
//! first call (the test's start barrier).
//! Each attempt prints one line: `admitted SEQ ID`, `refused CODE` or `error CODE`; the
//! last line is `done`. `--pause-on-error` reads a line from stdin after each error line
//! (the test restarts the server, then lets it go on). `--count 0` loops until a refusal. A connection that cannot be
//! made prints `error CODE` and exits 74.

use hcp_model::{Capability, PackId};
use hcp_state_pg::{
    Admission, AdmitError, ApprovalTake, CounterTake, GrantCheck, MachineId, PgState, StateConfig,
};
use hcp_store::counter::Limits;
use hcp_store::session::Timestamp;
use serde_json::{Map, Value, json};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Default)]
struct Args {
    url: String,
    schema: String,
    home: PathBuf,
    session: String,
    pack: String,
    count: u64,
    now_ms: Option<u64>,
    rate: Option<u64>,
    budget: Option<u64>,
    approval: bool,
    wait: bool,
    pause_on_error: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        count: 1,
        ..Args::default()
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{v}: {e}"));
        match flag.as_str() {
            "--url" => a.url = value()?,
            "--schema" => a.schema = value()?,
            "--home" => a.home = value()?.into(),
            "--session" => a.session = value()?,
            "--pack" => a.pack = value()?,
            "--count" => a.count = num(value()?)?,
            "--now-ms" => a.now_ms = Some(num(value()?)?),
            "--rate" => a.rate = Some(num(value()?)?),
            "--budget" => a.budget = Some(num(value()?)?),
            "--approval" => a.approval = true,
            "--wait" => a.wait = true,
            "--pause-on-error" => a.pause_on_error = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(a)
}

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("driver: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let state = MachineId::load_or_create(&args.home.join("state"))
        .and_then(|m| PgState::connect(&StateConfig::new(&args.url).with_schema(&args.schema), m));
    let state = match state {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(out, "error {}", e.code());
            let _ = writeln!(out, "done");
            return ExitCode::from(74);
        }
    };
    if args.wait {
        let _ = writeln!(out, "ready");
        let _ = out.flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let Ok(pack) = PackId::parse(&args.pack) else {
        eprintln!("driver: bad pack id");
        return ExitCode::from(2);
    };
    let tool = format!("{}.say", args.pack);
    let limits = Limits {
        rate_limit: args.rate,
        budget: args.budget,
        window_ms: 60_000,
    };
    let intent = fields(
        json!({"kind": "intent", "principal": "agent", "pack_id": args.pack,
                               "verb_key": "say", "decision": "allow"}),
    );
    let mut n = 0u64;
    loop {
        if args.count > 0 && n >= args.count {
            break;
        }
        n += 1;
        let now = Timestamp::now();
        let now_ms = args
            .now_ms
            .unwrap_or_else(|| u64::try_from(now.as_millisecond()).unwrap_or(0));
        let takes = [CounterTake {
            identity: "agent",
            tool: &tool,
            limits,
            now_ms,
        }];
        let counters: &[CounterTake<'_>] = if args.rate.is_some() || args.budget.is_some() {
            &takes
        } else {
            &[]
        };
        let key = [ApprovalTake {
            tool: &tool,
            principal_digest: "sha256:pd",
            args_digest: "sha256:args",
            policy_hash: "sha256:policy",
            escalation: false,
        }];
        let approvals: &[ApprovalTake<'_>] = if args.approval { &key } else { &[] };
        let r = state.admit(&Admission {
            now,
            principal: "agent",
            session: Some(&args.session),
            grant: Some(GrantCheck {
                pack: &pack,
                capabilities: &[Capability::VerbExecRead],
            }),
            counters,
            approvals,
            intent: &intent,
        });
        let line = match r {
            Ok(a) => {
                let outcome =
                    fields(json!({"kind": "outcome", "intent": a.audit_id, "exit_code": 0}));
                let _ = state.record_outcome(&outcome, Timestamp::now());
                format!("admitted {} {}", a.seq, a.audit_id)
            }
            Err(AdmitError::Refused(r)) => {
                let stop = args.count == 0;
                let _ = writeln!(out, "refused {}", r.code());
                let _ = out.flush();
                if stop {
                    break;
                }
                continue;
            }
            Err(e) => format!("error {}", e.code()),
        };
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
        if args.pause_on_error && line.starts_with("error") {
            let mut go = String::new();
            let _ = std::io::stdin().lock().read_line(&mut go);
        }
    }
    let _ = writeln!(out, "done");
    ExitCode::SUCCESS
}
