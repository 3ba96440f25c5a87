//! The next step for every code: a hint naming the command to run next, or the file of the
//! repository to read (`README.md`, `docs/packs.md`, `docs/config.md`, `docs/rules.md`). A
//! refusal that carries no hint of its own is given this one, so no refusal leaves its
//! reader without a next command.
//!
//! The match is exhaustive: a code added to the table does not compile until it has its
//! hint here.

use super::Code;

impl Code {
    /// [`Code::next_step`] for a refusal about pack `pack` (a call's): each placeholder
    /// `PACK` of the hint (a whole word: not `PACK_ID`) is the pack's id, so the command
    /// can be run as it stands.
    pub fn next_step_for(self, pack: Option<&str>) -> String {
        let hint = self.next_step();
        match pack.filter(|p| !p.is_empty()) {
            Some(p) => fill_word(hint, "PACK", p),
            None => hint.to_owned(),
        }
    }

    /// The command (or repository document) that is the next step after this code.
    pub fn next_step(self) -> &'static str {
        use Code::*;
        match self {
            Usage => "run `hcp help COMMAND` for the command's arguments",
            BadEnvelope | BadInput => {
                "check the JSON against `hcp show PACK` (the verb's arguments), then send it again"
            }
            RequestTooLarge => "send a smaller request; `hcp show PACK` shows what a verb takes",
            McpFailed => "check the client's configuration; `hcp doctor` checks the store",

            UnknownVerb | AmbiguousVerb => "list the active verbs with `hcp list`",
            PackInactive => "activate the pack with `hcp activate PACK`",
            TransportNotOffered => {
                "add the face to the pack's `transports` (docs/packs.md), then `hcp install --force DIR`"
            }
            KindUnsupported | PassThroughUnsupported => {
                "turn `pass_through` into named verbs with `hcp pack promote DIR` (docs/packs.md)"
            }
            NotInstalled => {
                "list the installed packs with `hcp list`; `hcp install DIR` installs one"
            }
            PackUnreadable => {
                "check that this user may read and write the pack's files, then `hcp lint DIR`"
            }
            NotConnectable => "see the pack's `binding` with `hcp show PACK` (docs/packs.md)",
            UnknownStimulus => "see the pack's stimuli with `hcp show PACK`",
            WriteStimulus => {
                "make the stimulus `read` in policy.json (docs/packs.md), then `hcp lint DIR`"
            }

            BadSession => "ask the owner for a new session: `hcp session start --principal ID`",
            ControlPlane => {
                "a control pack runs for the owner only: `hcp exec PACK.VERB` without `HCP_SESSION`"
            }
            NestedCall => {
                "run `hcp exec` from the harness with the caller's `HCP_SESSION`, not from inside a call"
            }

            ArgUnknown | ArgMissing | ArgInvalid | ArgLooksLikeFlag => {
                "see the verb's arguments with `hcp show PACK`"
            }
            TenantInArgs => {
                "the tenant comes from the session: `hcp session start --principal ID --project P`"
            }

            MissingGrant => {
                "the owner grants it: `hcp grant PRINCIPAL PACK verb.exec.read` (or `verb.exec.write`)"
            }
            ProjectRequired | NotProjectMember => {
                "start the session with the project: `hcp session start --principal ID --project P`"
            }
            WorkdirRequired => {
                "start the session with a workdir: `hcp session start --principal ID --workdir DIR`"
            }
            ConfirmRequired => "run it again with `--confirm` once the user agreed",

            UnknownTool => {
                "add the tool to the runtime policy (`hcp policy init PACK` prints its entry), check it with `hcp policy check`, then `hcp policy lock`"
            }
            Rbac => {
                "grant the role the tool in the runtime policy (`hcp policy decide` shows why), or start the session with `--role ROLE`"
            }
            ToolDrift | LockStale => {
                "the owner reviews the change and locks again: `hcp policy lock`"
            }
            LockUnparseable
            | LockDuplicateKey
            | LockUnsupportedVersion
            | LockInvalid
            | LockTooLarge
            | LockNotFound => "write the tool lock again with `hcp policy lock`",
            LimitStoreUnavailable => {
                "`hcp doctor` names a damaged counter file and the `rm` that repairs it (its principal's calls of that tool alone are refused), and the store's free space"
            }
            PolicyConflict
            | ResolverNotRead
            | ResolverOutputInvalid
            | ResolverFailed
            | NoArgSchema
            | NoPrincipal
            | ArgSchema
            | ArgBindingUnresolved
            | ResourceConstraint
            | ResourceNotFound
            | ResolverError
            | UnnameableArgs
            | UninspectableOutput
            | InternalError => {
                "see the rule that decided with `hcp policy decide TOOL --principal ID`"
            }
            NoResourceResolver => {
                "name a resolver in `config.json`: `\"resolvers\": {\"TOOL\": \"PACK.VERB\"}` (docs/config.md); `hcp doctor` checks the file"
            }
            NoEscalationTier | EscalationError => {
                "wire escalation to the owner: `\"escalation\": \"approvals\"` in `config.json` (docs/config.md), then `hcp approvals`"
            }
            CanaryExfil | SecretDetected | InjectionPattern | ExfiltrationPattern => {
                "the owner reviews the call in `hcp audit tail`; remove the secret or canary from the arguments"
            }
            RateLimit | Budget | LimitStoreCapacity => {
                "wait for the window, or the owner raises the limit in the runtime policy (`hcp policy check`)"
            }
            RequiresConfirmation | ConfirmError | ConfirmSuspended | ConfirmCancelled
            | PreCancelled => "the owner answers it: `hcp approvals`, then `hcp approve ID`",
            EscalationDenied => "the owner denied it (`hcp approvals` lists the answer)",
            DuplicateKey | UnknownKey | Unparseable | UnsafePattern | UnsupportedFeature
            | UnsupportedVersion | PolicyInvalid | InvalidField | InvalidContract
            | InvalidCanary | MissingKey | NotAList | NotAMapping | PolicyTooLarge
            | InvalidImport | InvalidBinding | InvalidGrant | NotAnObject | NotFound
            | ToolsNotAMapping => {
                "fix the runtime policy at the place named, then `hcp policy check`"
            }

            BindingRequired | ConnectOnly | ConnectOutputInvalid | ConnectFailed => {
                "connect the principal: `hcp connect PACK` (with its `HCP_SESSION`)"
            }
            BindingInsecure => {
                "make the credential file 0600, or `hcp disconnect PACK` and `hcp connect PACK`"
            }

            BadConfig => {
                "fix `config.json` at the place named (its keys: docs/config.md); `hcp doctor` checks it"
            }
            SandboxUnavailable | SandboxFailed => {
                "`hcp doctor` names what the kernel lacks and its fix"
            }
            BinMissing | BinNotExecutable | BinChanged => {
                "install the pack again to pin its bin: `hcp install --force DIR`"
            }
            EnvRefused => {
                "remove the name from `wrap.agent_env` (docs/packs.md), then `hcp install --force DIR`"
            }
            SpawnFailed | SuperviseFailed => {
                "`hcp doctor` checks the machine; `hcp show PACK` names the bin"
            }
            AuditUnavailable => {
                "`hcp audit verify` names what is wrong with the trail; `hcp doctor` shows the disk's free space and the audit reserve"
            }
            Timeout => "give the call more time with `--timeout SECS`",
            Cancelled => "run the call again: `hcp exec PACK.VERB …`",
            MemoryExceeded => {
                "raise `limits.memory_bytes` in `config.json` (docs/config.md); `hcp doctor` shows the limits"
            }
            OutcomeDeferred => {
                "do not run the write again: it happened; `hcp audit verify` shows the call"
            }
            OutputWithheld => {
                "see the output rule with `hcp policy decide`; the owner may change it"
            }

            StoreUnusable => {
                "`HCP_HOME` must be the absolute path of a store directory the owner may write (`hcp init` makes one); `hcp doctor` cannot check a store it cannot open"
            }
            StoreIo => "`hcp doctor` checks the store and its disk",
            StoreDamaged => {
                "`hcp doctor` lists each damaged record with the command that repairs it"
            }
            StateUnavailable => {
                "`hcp doctor` checks the state backend; `hcp state migrate` makes its schema"
            }
            AuditDamaged | AuditBadEntry => "`hcp audit verify` names the first fault",
            NoStore => "make a store with `hcp init` (or fix `HCP_HOME`)",
            WitnessUnavailable => {
                "`hcp doctor` checks `audit.witness` in `config.json` (docs/config.md); `hcp config set audit.witness DIR` (or `hcp config unset audit.witness`) moves it, a recorded act that works while the witness is unavailable"
            }

            LintFailed | MissingFile | BadJson | UnknownField | BadPackId | SurfaceIdMismatch
            | BadVersion | BadLand | BadOperation | MissingVerb | ExtraVerb | MissingStimulus
            | ExtraStimulus | ConfirmOnRead | ConnectNotWrite | CliBinMismatch | BadPlaceholder
            | ReservedPlaceholder | ExecWrapperBin | HcpBinReserved | SecretFile
            | SymlinkInPack | UnsafePath | BadBinding | BadOpenapi | UnknownOperation
            | ConfirmNotMirrored | VerbCount | SkillTooLong | SkillMissingSection
            | AbsolutePathInSkill | ExtraFile | PassThroughPresent | UnsupportedKind
            | CodeRunningCli => {
                "fix the pack (each lint code and its fix: docs/packs.md), then `hcp lint DIR`"
            }
            AlreadyInstalled => "replace it with `hcp install --force DIR`",
            BadPackDir => {
                "name a pack directory, the one holding `surface.json`, `policy.json` and `HARNESS.md` (docs/packs.md)"
            }
            FamilyClaimed => {
                "share the family on purpose with `hcp install DIR --join-family FAMILY`, or give the pack a `binding.family` of its own"
            }
            NothingToPromote => {
                "`hcp pack promote DIR` needs a pack with `pass_through` (docs/packs.md)"
            }
            SkillCollision | SkillExportUnusable => {
                "check `skills.export` in `config.json` (docs/config.md); `hcp doctor` lists each folder"
            }

            OwnerOnly => {
                "the owner is the Unix user running `hcp` without `HCP_SESSION`: run `hcp COMMAND` in the owner's own shell with `HCP_SESSION` unset (`env -u HCP_SESSION hcp COMMAND`)"
            }
            BadPrincipal | BadValue | BadTtl => "see `hcp session start --help`",
            BadConfigKey => {
                "`hcp config get` prints every key with its value; set one with `hcp config set KEY VALUE`"
            }
            BadWorkdir => {
                "give a project directory of its own; the rules: README.md, \"Working directories\""
            }
            BadSeed => "give a directory to copy: `hcp home PACK --principal P --seed DIR`",
            BadCapability => "see `hcp grant --help` for the capabilities",
            UnknownApproval | ApprovalUsed | ApprovalExpired | ApprovalDecided
            | NotAnEscalation => "list the approvals with `hcp approvals`",
            BadSince => "give `--since` as RFC 3339 or a duration such as `24h`",

            HashMismatch | PrevMismatch | TornTail | Truncated | MissingLog
            | CheckpointMismatch | SeqMismatch | MissingAnchor | AnchorMismatch | BadAnchor
            | OrphanOutcome | DuplicateOutcome | ApprovalSpentTwice | MachineMismatch
            | BadCheckpoint | Rollback | MissingChainKey => {
                "`hcp audit verify --json` names the first fault and its record"
            }
            ExportFailed => "run `hcp audit export` again: it resumes at its cursor",
        }
    }
}

/// `text` with each whole-word `word` (not inside a longer name of letters, digits and
/// `_`) replaced by `by`.
fn fill_word(text: &str, word: &str, by: &str) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(word) {
        let (before, after) = (&rest[..i], &rest[i + word.len()..]);
        let whole = !before.chars().next_back().is_some_and(is_name)
            && !after.chars().next().is_some_and(is_name);
        out.push_str(before);
        out.push_str(if whole { by } else { word });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// Every code of the table has a next step that names a command or a document of the
    /// repository, never the contract.
    #[test]
    fn every_code_names_its_next_command() {
        let without: Vec<String> = Code::ALL
            .iter()
            .map(|c| (c, c.next_step()))
            .filter(|(_, h)| {
                !(h.contains("`hcp ")
                    || h.contains("docs/")
                    || h.contains("README.md")
                    || h.contains("`--"))
                    || h.contains("RUNTIME")
            })
            .map(|(c, h)| format!("{c}: {h}"))
            .collect();
        assert!(without.is_empty(), "{without:#?}");
    }

    #[test]
    fn a_hint_names_the_pack_of_the_call() {
        assert_eq!(
            Code::ArgInvalid.next_step_for(Some("transit")),
            "see the verb's arguments with `hcp show transit`"
        );
        assert_eq!(
            Code::ArgInvalid.next_step_for(None),
            Code::ArgInvalid.next_step()
        );
        assert_eq!(
            fill_word("`hcp exec PACK.VERB`, `PACK_ID`, `XPACK`", "PACK", "mail"),
            "`hcp exec mail.VERB`, `PACK_ID`, `XPACK`"
        );
    }
}
