//! The one pipeline of RUNTIME §5: [`run`] takes what a call names — its [`Subject`]: a
//! verb, a pack's stimuli, a pack's binding — through the steps of `crate::step` in the
//! contract's order, in the [`Mode`] the face makes it (a run, a run the person answered,
//! `hcp connect`, `hcp disconnect`). `hcp exec` (the CLI face and the JSON envelope),
//! `hcp mcp`'s tools, a resolver's call, `hcp connect`, `hcp disconnect` and `hcp sense`
//! all come through here.
//!
//! Every refusal from step 2 on is recorded (RUNTIME §6); a target miss of a verb too,
//! under the principal the session names. Nothing single-use is spent before admission
//! (step 9b), and everything that can refuse without spending runs before it. Admission
//! writes the call's durable `intent`; from then on every end of the call — a run, a
//! timeout, a cancel, a spawn that failed — is its `outcome` record, not a refusal.

use crate::Runtime;
use crate::call::{Answer, Call, CallArgs, Caller, Words};
use crate::confirm::Answered;
use crate::policy::resolve::Runner;
use crate::record::{Record, early_refusal};
use crate::redact::Redactor;
use crate::refusal::Refusal;
use crate::sense::Sinks;
use crate::snapshot::{Reads, Snapshot};
use crate::step::admit::{Admit, sense_capabilities, verb_capabilities};
use crate::step::binding::{ConnectVerb, Mint};
use crate::step::gate::GateReads;
use crate::step::policy::{PolicyReads, PolicyStep};
use crate::step::prepare::PrepareReads;
use crate::step::run::Relay;
use crate::step::{self, Stop};
use hcp_gate::Face;
use hcp_model::Code;
use hcp_model::facts::RecordFace;
use hcp_store::pack::InstalledPack;
use jiff::Timestamp;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// What a call names.
#[derive(Debug)]
pub enum Subject<'a> {
    /// A verb, as a face names it (`hcp exec`, the envelope, an MCP tool).
    Verb(Call),
    /// A pack's stimuli: `hcp sense PACK [REF]`.
    Stimuli(Stimuli<'a>),
    /// A pack's binding: `hcp connect PACK` (its connect verb with `words`) and `hcp
    /// disconnect PACK`.
    Binding(Binding<'a>),
}

/// `hcp sense PACK [REF] [--count N]` and where its relay writes.
#[derive(Debug)]
pub struct Stimuli<'a> {
    /// The pack.
    pub pack_id: &'a str,
    /// The ref; every ref the pack declares when `None`.
    pub reference: Option<&'a str>,
    /// Stop after relaying this many events.
    pub count: Option<u64>,
    /// Where the events and the notes go.
    pub sinks: Sinks<'a>,
}

/// A pack's binding, for `hcp connect` and `hcp disconnect` (the pack from
/// [`crate::connect::connectable`]).
#[derive(Debug)]
pub struct Binding<'a> {
    /// The pack.
    pub pack: &'a InstalledPack,
    /// The connect verb's words (`hcp connect` only).
    pub words: Words,
    /// `--timeout` of the connect verb.
    pub timeout: Option<Duration>,
}

/// How the face makes the call.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// Run it. `cancel` is how the face abandons the call mid-run (`hcp exec`: a signal;
    /// `hcp mcp`: the client cancelled or went away; `hcp sense`: a signal stops the
    /// relay): a descriptor that becomes readable, or hangs up, when the call must end.
    /// The adapter then ends the child's process group, and the run is answered and
    /// recorded with code `cancelled` (a sense's relay stops and answers 0).
    Exec(Option<BorrowedFd<'a>>),
    /// Run a call the person answered through the face (RUNTIME §10, [`crate::confirm`]).
    /// With [`Answered::command`], the gate counts the call as confirmed — its arguments,
    /// and so its audit digest, stay as sent — and after child preparation it is refused
    /// (`confirm_required`, nothing spent) unless the command it is about to run has that
    /// digest, the [`crate::confirm::Preview::digest`] the person accepted; its record says
    /// `"confirm": "elicitation"`. With [`Answered::approval`], a record that takes that
    /// approval says `"approved_by": "elicitation"`.
    Answered(Option<BorrowedFd<'a>>, &'a Answered),
    /// `hcp connect`: run the pack's connect verb, the one path on which a session may
    /// (elsewhere it is `connect_only`: its stdout is the credential).
    Connect,
    /// `hcp disconnect`: steps 1, 2 and the grant of step 4 (`pack.connect` for a
    /// session), then the credential removed and recorded.
    Disconnect,
}

impl<'a> Mode<'a> {
    fn cancel(self) -> Option<BorrowedFd<'a>> {
        match self {
            Self::Exec(c) | Self::Answered(c, _) => c,
            Self::Connect | Self::Disconnect => None,
        }
    }

    fn answered(self) -> Option<&'a Answered> {
        match self {
            Self::Answered(_, a) => Some(a),
            _ => None,
        }
    }

    fn connect_verb(self) -> ConnectVerb {
        match self {
            Self::Connect => ConnectVerb::Connecting,
            _ => ConnectVerb::Refused,
        }
    }
}

/// Runs one call through RUNTIME §5 and answers it; every refusal carries its code. A
/// subject and a mode that do not go together (a verb to disconnect, a binding to run)
/// are refused `internal_error`, unrecorded.
pub fn run(rt: &Runtime, caller: &Caller, subject: Subject<'_>, mode: Mode<'_>) -> Answer {
    let resolvers = Resolvers { rt, caller };
    drive(rt, caller, subject, mode, Some(&resolvers))
}

/// How step 7 makes a resolver's call: through this pipeline, as the same caller, with
/// no resolver of its own (no loop).
struct Resolvers<'a> {
    rt: &'a Runtime,
    caller: &'a Caller,
}

impl Runner for Resolvers<'_> {
    fn run(&self, call: Call) -> Answer {
        drive(
            self.rt,
            self.caller,
            Subject::Verb(call),
            Mode::Exec(None),
            None,
        )
    }
}

/// What every step of one call may consult.
struct Cx<'a> {
    rt: &'a Runtime,
    caller: &'a Caller,
    mode: Mode<'a>,
    runner: Option<&'a dyn Runner>,
    now: Timestamp,
}

fn drive(
    rt: &Runtime,
    caller: &Caller,
    subject: Subject<'_>,
    mode: Mode<'_>,
    runner: Option<&dyn Runner>,
) -> Answer {
    // A state that cannot be used refuses before any step (RUNTIME §9): no refusal
    // could be recorded, and nothing falls back to the files. A database's connection
    // is opened, and its schema checked, by the snapshot's reads (one round trip).
    if let Err(e) = crate::backend::ready_to_read(rt) {
        return early_refusal(Refusal::store(&e));
    }
    // A runtime policy or `config.json` changed since last recorded is an act of
    // authority, recorded once by the first call that sees it (RUNTIME §6).
    let kept_damaged = match crate::authority::note_files_for_call(rt) {
        Ok(d) => d,
        Err(e) => return early_refusal(Refusal::store(&e)),
    };
    let now = Timestamp::now();
    let cx = Cx {
        rt,
        caller,
        mode,
        runner,
        now,
    };
    // ── 0. Snapshot: every read of the store and the state, up front. ──────────────────
    let reads = match (&subject, mode) {
        (Subject::Verb(call), Mode::Exec(_) | Mode::Answered(..)) => Reads::Verb {
            pack_id: call.pack_id.as_deref(),
            target: &call.target,
        },
        (Subject::Stimuli(s), Mode::Exec(_)) => Reads::Pack {
            pack_id: s.pack_id,
            key: s.reference.unwrap_or("*"),
        },
        (Subject::Binding(b), Mode::Connect) => Reads::Verb {
            pack_id: Some(b.pack.id.as_str()),
            target: b.pack.manifest.connect_verb().unwrap_or_default(),
        },
        (Subject::Binding(b), Mode::Disconnect) => Reads::Pack {
            pack_id: b.pack.id.as_str(),
            key: b.pack.manifest.connect_verb().unwrap_or_default(),
        },
        _ => {
            return early_refusal(Refusal::new(
                Code::InternalError,
                "a call's subject and mode do not go together",
            ));
        }
    };
    let mut snap = Snapshot::load(rt, caller, reads, now);
    if let Some(e) = kept_damaged {
        snap.refuse_sessions(&e);
    }
    if let Some(r) = snap.unavailable.take() {
        return early_refusal(r);
    }
    let mut rec = Record::start(rt);
    let answer = match subject {
        Subject::Verb(call) => verb(&cx, snap, &call, &mut rec),
        Subject::Stimuli(s) => stimuli(&cx, snap, s, &mut rec),
        Subject::Binding(b) if matches!(mode, Mode::Connect) => {
            verb(&cx, snap, &connect_call(b), &mut rec)
        }
        Subject::Binding(_) => disconnect(&cx, snap, &mut rec),
    };
    answer.unwrap_or_else(|stop| match (mode, stop) {
        (Mode::Disconnect, Stop::Recorded(r)) => {
            let audit_id = step::bind::refused(rt, &rec, r.code);
            rec.refusal_answer(r, audit_id)
        }
        (_, stop) => step::outcome::stopped(rt, &mut rec, stop),
    })
}

/// The call of `hcp connect`: the pack's connect verb with the command line's words.
fn connect_call(b: Binding<'_>) -> Call {
    Call {
        pack_id: Some(b.pack.id.to_string()),
        target: b
            .pack
            .manifest
            .connect_verb()
            .unwrap_or_default()
            .to_owned(),
        args: CallArgs::Words(b.words),
        face: Face::Cli,
        timeout: b.timeout,
    }
}

/// Steps 1–9 and the post-gate for a verb, on the call's snapshot.
fn verb(cx: &Cx<'_>, snap: Snapshot, call: &Call, rec: &mut Record) -> Result<Answer, Stop> {
    rec.principal = Some(snap.principal_label());
    let Snapshot {
        principal,
        target,
        active,
        grants,
        policy,
        lock,
        config,
        credential,
        operation,
        ..
    } = snap;
    let verb = step::target::verb(target, operation, call, rec)?;
    let principal = step::principal::resolve(principal, rec)?;
    let answered = cx.mode.answered();
    let who = (&verb, &principal);
    let reads = GateReads {
        grants,
        active,
        policy: &policy,
        lock: lock.as_ref(),
    };
    let allowed = step::gate::verb(cx.rt, cx.caller, who, reads, (call, answered), rec)?;
    let step7 = PolicyStep {
        rt: cx.rt,
        runner: cx.runner,
        timeout: call.timeout,
        face: call.face,
        now: cx.now,
    };
    let reads = PolicyReads {
        policy,
        lock,
        config: &config,
    };
    let policed = step::policy::verb(&step7, who, reads, allowed.values.clone(), rec)?;
    let connect = cx.mode.connect_verb();
    let credential = step::binding::verb(cx.rt, who, connect, credential, cx.now)?;
    let secret = credential.as_ref().map(|c| &c.secret);
    let reads = PrepareReads { config: &config };
    let values = (&allowed, &policed.values);
    let env = (cx.rt, cx.caller);
    let mut work = step::prepare::verb(env, who, values, (secret, reads), answered, rec)?;
    rec.operation = Some(allowed.operation);
    rec.land = Some(allowed.land);
    let tool = verb.tool();
    let admit = Admit {
        pack: &verb.pack,
        capabilities: verb_capabilities(&verb.pack, &verb.key, allowed.operation, &principal),
        spend: &policed.spend,
        tool: &tool,
    };
    if let Err(stop) = step::admit::admit(cx.rt, (&principal, cx.now), &admit, answered, rec) {
        work.clean_up();
        return Err(stop);
    }
    work.admitted();
    let run = (&mut work, &allowed, &config);
    let ran = step::run::verb(cx.rt, run, (call.timeout, cx.mode.cancel()), rec)?;
    let posted = step::post::verb(
        ran,
        (&principal, &tool),
        (credential.as_ref(), policed.policy.as_ref()),
        rec,
    );
    step::outcome::verb(cx.rt, (&verb, &allowed), posted, rec)
}

/// Steps 1–9 for a pack's stimuli (`hcp sense`): the gate and the runtime policy for
/// every ref (tool `PACK_ID.REF`), binding mint and preparation for the triggers that run,
/// admission (the sense's intent), then the relay and, when it stops, its outcome.
/// Every refusal, the target's too, is recorded with `"face": "sense"` and `verb_key`
/// the ref (`*` for all).
fn stimuli(cx: &Cx<'_>, snap: Snapshot, s: Stimuli<'_>, rec: &mut Record) -> Result<Answer, Stop> {
    rec.verb_key = Some(s.reference.unwrap_or("*").to_owned());
    rec.operation = Some(hcp_model::Operation::Read);
    rec.facts.face = Some(RecordFace::Sense);
    let label = snap.principal_label();
    let Snapshot {
        principal,
        target,
        active,
        grants,
        policy,
        config,
        credential,
        ..
    } = snap;
    rec.principal = Some(label);
    rec.pack_id = Some(s.pack_id.to_owned());
    let stim = step::target::stimuli(target, active, s.reference, rec)?;
    let principal = step::principal::resolve(principal, rec)?;
    let reads = GateReads {
        grants,
        active,
        policy: &policy,
        lock: None,
    };
    let refs = (&stim.pack, stim.refs.as_slice());
    let allowed = step::gate::stimuli(cx.caller, refs, &principal, reads)?;
    let step7 = PolicyStep {
        rt: cx.rt,
        runner: cx.runner,
        timeout: None,
        face: Face::Cli,
        now: cx.now,
    };
    let ids = (stim.pack.id.as_str(), stim.refs.as_slice());
    let reads = PolicyReads {
        policy,
        lock: None,
        config: &config,
    };
    let spend = step::policy::stimuli(&step7, ids, &principal, reads, rec)?;
    let asked = (allowed.as_slice(), s.reference);
    let mint = step::binding::stimuli(cx.rt, (&stim.pack, &principal), asked, credential, cx.now)?;
    let (secret, unbound, running) = match mint {
        Mint::Bound(secret) => (secret, None, allowed.as_slice()),
        Mint::Unbound(code) => (None, Some(code), &[][..]),
    };
    let reads = PrepareReads { config: &config };
    let env = (cx.rt, cx.caller);
    let who = (&stim, &principal);
    let mut triggers = step::prepare::stimuli(env, who, running, (secret.as_ref(), reads), rec)?;
    let tool = format!("{}.{}", stim.pack.id, stim.refs.join(","));
    let admit = Admit {
        pack: &stim.pack,
        capabilities: sense_capabilities(&principal),
        spend: &spend,
        tool: &tool,
    };
    step::admit::admit(cx.rt, (&principal, cx.now), &admit, None, rec)?;
    for (_, child) in &mut triggers {
        child.fresh.keep();
    }
    let redact = secret.as_ref().map(Redactor::new).unwrap_or_default();
    let relay = Relay {
        pack: &stim.pack,
        principal: &principal.id,
        refs: &stim.refs,
        triggers,
        redact: &redact,
        count: s.count,
    };
    let relayed = step::run::stimuli(cx.rt, relay, s.sinks, (cx.mode.cancel(), unbound));
    Ok(step::outcome::stimuli(cx.rt, relayed, rec))
}

/// Steps 1, 2 and the grant of step 4 for `hcp disconnect`, then the credential removed.
fn disconnect(cx: &Cx<'_>, snap: Snapshot, rec: &mut Record) -> Result<Answer, Stop> {
    rec.principal = Some(snap.principal_label());
    let Snapshot {
        principal,
        target,
        grants,
        ..
    } = snap;
    let verb = step::target::binding(target, rec)?;
    let principal = step::principal::resolve(principal, rec)?;
    step::gate::binding(&verb.pack, &principal, grants)?;
    step::bind::disconnect(cx.rt, (&verb, &principal), rec)
}
