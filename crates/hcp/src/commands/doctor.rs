//! `hcp doctor [--json]`: what this machine and store can enforce (RUNTIME §3, §5 "The
//! child", "Confinement of every land", §10), as the runtime examines it
//! (`hcp_runtime::doctor`), printed: store health, the Landlock ABI, seccomp, the process
//! mechanism, whether fork bombs are bounded, the limits, the bins against their pins,
//! the credentials' modes and the skill export folders.
//!
//! Exit 0 when nothing is wrong, 1 when something is.

use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use hcp_runtime::doctor::Report;
use std::io::Write;

/// Arguments of `hcp doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Scan `/etc` again for the store's index of what every view covers (RUNTIME §5.1;
    /// owner only), before the examination.
    #[arg(long)]
    refresh: bool,
}

/// Runs `hcp doctor`.
pub fn run(a: Args) -> CliResult {
    // A missing store is reported, not made (RUNTIME §4): exit 1.
    let root = super::session::home_root()?;
    // It writes nothing (a store of an earlier version is examined as it is).
    let home = match hcp_store::made::open_read(&root) {
        Ok((h, _)) => h,
        Err(e @ hcp_store::StoreError::NoStore { .. }) => return no_store(&e, a.json),
        Err(e) => return Err(super::session::store_error(&e)),
    };
    let rt = hcp_runtime::Runtime::open(home);
    if a.refresh {
        super::session::require_owner("doctor --refresh")?;
        hcp_runtime::view_index::refresh_view_index(rt.home())
            .map_err(|e| super::session::store_error(&e))?;
    }
    let report = hcp_runtime::doctor::examine(&rt).map_err(CliError::from)?;
    let mut out = std::io::stdout().lock();
    let r = if a.json {
        serde_json::to_string_pretty(&report)
            .map_err(std::io::Error::other)
            .and_then(|s| writeln!(out, "{s}"))
    } else {
        write!(out, "{}", human(&report))
    };
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(
            Code::StoreIo,
            format!("cannot write the report: {e}"),
        )),
        _ => Ok(if report.ok { exit::OK } else { exit::REFUSED }),
    }
}

/// `hcp doctor` where there is no store: says so, with the path and `hcp init`; exit 1.
fn no_store(e: &hcp_store::StoreError, json: bool) -> CliResult {
    let hint = e.hint().unwrap_or_default();
    if json {
        out!(
            "{}",
            serde_json::json!({
                "ok": false,
                "store": {"exists": false, "code": Code::NoStore, "message": e.to_string(), "hint": hint},
                "problems": [e.to_string()],
            })
        );
    } else {
        out!("store\n  home                  {e}\n  hint                  {hint}\nproblems\n  {e}");
    }
    Ok(exit::REFUSED)
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn human(r: &Report) -> String {
    let mut s = String::new();
    let mut line = |t: String| {
        s.push_str(&t);
        s.push('\n');
    };
    line("store".into());
    line(format!(
        "  home                  `{}`{}",
        r.store.home.display(),
        if r.store.exists {
            ""
        } else {
            " (not created yet)"
        }
    ));
    line(format!(
        "  config                `{}`: {}",
        r.store.config.path.display(),
        match (&r.store.config.error, r.store.config.present) {
            (Some(_), _) => "invalid, see below".to_owned(),
            (None, true) => "ok".into(),
            (None, false) => "absent, defaults".into(),
        }
    ));
    line(format!(
        "  packs                 {} installed, {} active",
        r.store.packs_installed, r.store.packs_active
    ));
    let audit = &r.store.audit;
    line(format!(
        "  audit trail           {} record{}, {}{}{}",
        audit.records,
        if audit.records == 1 { "" } else { "s" },
        match (&audit.error, &audit.fault, audit.sound) {
            (Some(_), _, _) => "unreadable, see below".to_owned(),
            (None, Some(f), _) => format!("broken ({f})"),
            (None, None, true) if audit.earlier_version =>
                "sound, an earlier-version trail (plain SHA-256): it gains its keys with a `migrate` record at the next command that uses the store".to_owned(),
            (None, None, true) => "sound".to_owned(),
            (None, None, false) => "broken".to_owned(),
        },
        match audit.interrupted {
            0 => String::new(),
            1 => ", 1 interrupted call (hcp killed while it ran)".to_owned(),
            n => format!(", {n} interrupted calls (hcp killed while they ran)"),
        },
        if audit.loose_modes.is_empty() {
            ""
        } else {
            ", modes too open, see below"
        }
    ));
    if let Some(w) = &audit.witness {
        line(format!("  audit witness         {w}"));
    }
    if let Some(res) = &audit.reserve {
        line(format!(
            "  audit reserve         {} of {} kept beside the trail, {} free on its disk{}",
            hcp_runtime::trail::bytes(res.reserved),
            hcp_runtime::trail::bytes(res.target),
            res.free
                .map_or("unknown".to_owned(), hcp_runtime::trail::bytes),
            res.cannot_keep
                .map(|fs| format!(" ({fs} cannot keep a reserve)"))
                .unwrap_or_default()
        ));
    }
    for l in r.state.lines() {
        line(l);
    }
    let sb = &r.sandbox;
    line("sandbox (every call)".into());
    line(format!(
        "  landlock              {}",
        match sb.landlock {
            "available" => format!("abi {} (hcp uses {})", sb.landlock_abi, sb.used_abi),
            "not_enabled" => "not enabled in this kernel".into(),
            _ => "not in this kernel".into(),
        }
    ));
    line(format!("  filesystem rules      {}", yes(sb.filesystem)));
    line(format!("  hidden paths          {}", sb.hidden_paths));
    line(format!("  seccomp               {}", yes(sb.seccomp)));
    line(format!(
        "  network               {} (deny enforceable: {})",
        sb.network,
        yes(sb.network_deny_enforceable)
    ));
    line(format!("  signal scoping        {}", yes(sb.scoped)));
    line(format!(
        "  processes             {} (end with a killed hcp: {})",
        sb.processes,
        yes(sb.descendants_end_with_killed_hcp)
    ));
    line(format!("  fork bombs            {}", sb.fork_bombs));
    line(format!("  require               {}", yes(sb.require)));
    line(format!(
        "  calls                 {} (local verbs: {})",
        sb.calls, sb.local_verbs
    ));
    line("limits (every child)".into());
    for l in &r.limits {
        line(format!(
            "  {:<22}{}{}{}",
            l.name,
            l.effective,
            if l.enforced { "" } else { " (not enforced)" },
            l.note.map(|n| format!(": {n}")).unwrap_or_default()
        ));
    }
    view_lines(&r.view, &mut line);
    line("packs".into());
    if r.packs.is_empty() {
        line("  none installed".into());
    }
    for p in &r.packs {
        if let Some(d) = &p.damaged {
            line(format!("  {}  damaged: {d}", p.id));
        }
        for b in &p.bins {
            line(format!(
                "  {}  {} `{}`: {}",
                p.id,
                b.program,
                b.path.display(),
                b.status
            ));
        }
    }
    if !r.networks.is_empty() {
        line("network by pack".into());
        for n in &r.networks {
            line(format!("  {}  {}", n.pack_id, n.line()));
        }
    }
    if !r.bindings.is_empty() {
        line("bindings".into());
        for b in &r.bindings {
            line(format!(
                "  {}  {}  mode {}{}",
                b.principal,
                b.family,
                b.mode,
                if b.secure {
                    ""
                } else {
                    "  (insecure: refused at exec)"
                }
            ));
        }
    }
    if !r.skill_exports.is_empty() {
        line("skill exports".into());
        for f in &r.skill_exports {
            line(format!(
                "  `{}`{}: {}",
                f.dir
                    .as_ref()
                    .map_or(f.entry.clone(), |d| d.display().to_string()),
                if f.configured {
                    ""
                } else {
                    " (left `skills.export`)"
                },
                f.status
            ));
            for e in &f.entries {
                line(format!("    {}  {}: {}", e.id, e.state, e.detail));
            }
        }
    }
    let rp = &r.runtime_policy;
    if rp.file.is_some() || rp.lock.present || rp.mode == "observe" {
        line("runtime policy".into());
        if rp.mode == "observe" {
            line(format!(
                "  mode                  observe: not enforced{}",
                if rp.file.is_some() {
                    ""
                } else {
                    " (and there is no policy to observe)"
                }
            ));
        }
        if let Some(f) = &rp.file {
            line(format!(
                "  policy                `{}`: {}",
                f.display(),
                rp.content_hash
                    .as_deref()
                    .unwrap_or("does not load, see below")
            ));
        }
        if let Some(c) = &rp.cache {
            line(format!("  compiled cache        {c}"));
        }
        if let (Some(f), false) = (&rp.file, rp.uncovered.is_empty()) {
            line(format!(
                "  not in the policy     {} active verbs, refused to sessions (unknown_tool): {}; `hcp policy init --merge {}` adds them",
                rp.uncovered.len(),
                rp.uncovered.join(", "),
                f.display()
            ));
        }
        if let Some(c) = &rp.cache_last_rebuilt {
            line(format!("  cache last rebuilt    {c}"));
        }
        if rp.lock.present {
            line(format!(
                "  tool lock             {}",
                match &rp.lock.error {
                    Some(_) => "does not read, see below".to_owned(),
                    None => format!(
                        "{} verbs locked; {} changed, {} not locked, {} stale",
                        rp.lock.locked,
                        rp.lock.drifted.len(),
                        rp.lock.unlocked.len(),
                        rp.lock.stale.len()
                    ),
                }
            ));
        }
    }
    for n in &r.notes {
        line(format!("note: {n}"));
    }
    if rp.mode == "observe" {
        line("note: `policy_mode` is `observe` in `config.json`: the runtime policy refuses nothing; each call it would refuse runs and records `would_refuse` (`hcp policy replay` shows what a candidate would change)".into());
    }
    if r.problems.is_empty() {
        line("no problems found".into());
    } else {
        line(format!("{} problem(s):", r.problems.len()));
        for p in &r.problems {
            line(format!("  - {p}"));
        }
    }
    s
}

/// The view part (RUNTIME §5.1–§5.4): what calls are given beyond the view, the `/etc`
/// index, the quarantine.
fn view_lines(v: &hcp_runtime::view_health::ViewHealth, line: &mut impl FnMut(String)) {
    line("view (what calls are given)".into());
    line(format!(
        "  /etc index            {}",
        match (
            &v.etc_index.scanned_at,
            v.etc_index.age_seconds,
            &v.etc_index.error
        ) {
            (Some(at), Some(age), _) => format!(
                "scanned {at} ({age} s ago{}); `hcp doctor --refresh` scans again",
                if v.etc_index.this_boot {
                    ""
                } else {
                    ", another boot: the next call scans again"
                }
            ),
            (_, _, Some(e)) => e.clone(),
            _ => "none".into(),
        }
    ));
    if let Some(m) = &v.missing_mechanism {
        line(format!("  missing               {}", m.what));
        line(format!("  fix                   {}", m.fix));
    }
    if v.host_network.is_empty() {
        line("  host network          none".into());
    }
    for p in &v.host_network {
        line(format!(
            "  host network          {}",
            if p == "*" {
                "every pack without its own (`sandbox.network`)".to_owned()
            } else {
                format!("`{p}`")
            }
        ));
    }
    for s in &v.sockets {
        line(format!(
            "  socket                `{}` to `{}`: every pathname socket of its view is reachable",
            s.path.display(),
            s.pack
        ));
    }
    for w in &v.write_paths {
        line(format!(
            "  write path            `{}` to `{}`",
            w.path.display(),
            w.pack
        ));
    }
    for m in &v.mounts_beneath {
        line(format!(
            "  mount beneath         `{}` in `{}` of `{}`'s view: it comes along",
            m.mount_point.display(),
            m.view_path.display(),
            m.pack
        ));
    }
    for k in &v.ignored_keys {
        line(format!("  ignored key           `{k}`"));
    }
    if v.quarantine.is_empty() {
        line("  quarantine            empty".into());
    }
    for q in &v.quarantine {
        let names: Vec<String> = q
            .names
            .iter()
            .map(|n| format!("`{}`", n.display()))
            .collect();
        line(format!(
            "  quarantine            call {}: {} ({} bytes) in `{}`",
            q.audit_id,
            names.join(", "),
            q.bytes,
            q.dir.display()
        ));
    }
}
