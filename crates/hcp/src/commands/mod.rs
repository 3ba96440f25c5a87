//! One module per subcommand; [`Cli`] is the whole command line.

use crate::error::CliResult;
use clap::{Parser, Subcommand};

pub mod activate;
pub mod approve;
pub mod audit;
pub mod authority;
pub mod config;
pub mod connect;
pub mod doctor;
pub mod exec;
pub mod grant;
pub mod home;
pub mod init;
pub mod install;
pub mod lint;
pub mod list;
pub mod mcp;
pub mod pack;
pub mod policy;
pub mod sense;
pub mod session;
pub mod show;
pub mod state;

/// The command line of `hcp`.
#[derive(Debug, Parser)]
#[command(
    name = "hcp",
    version,
    about = "Run Harness Context Protocol packs through a fail-closed gate",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make the store `HCP_HOME` names: its marker, keys and first audit record.
    Init(init::Args),
    /// Check pack directories (RUNTIME §2).
    Lint(lint::Args),
    /// Work on a pack directory: `promote` a `pass_through` pack to named verbs.
    #[command(subcommand)]
    Pack(pack::PackCommand),
    /// Lint a pack and install it into the store.
    Install(install::InstallArgs),
    /// Remove an installed pack, its skill and its bindings.
    Uninstall(install::UninstallArgs),
    /// List installed packs.
    List(list::Args),
    /// Show one installed pack.
    Show(show::Args),
    /// Print, seed or remove a tenant home (RUNTIME §5.2; owner only).
    Home(home::Args),
    /// Write an installed pack's SKILL.md for harnesses.
    Activate(activate::ActivateArgs),
    /// Remove an installed pack's SKILL.md; its verbs stop resolving.
    Deactivate(activate::DeactivateArgs),
    /// Run a pack's verb through the gate (RUNTIME §5).
    Exec(exec::Args),
    /// Start, end and list principals' sessions (owner only).
    #[command(subcommand)]
    Session(session::SessionCommand),
    /// Grant capabilities to a principal on a pack (owner only).
    Grant(grant::GrantArgs),
    /// Take capabilities back (owner only).
    Revoke(grant::RevokeArgs),
    /// Read or change `config.json` by dotted key (owner only).
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// Create or upgrade the schema of a fleet's state database (owner only).
    #[command(subcommand)]
    State(state::StateCommand),
    /// Verify and read the audit trail.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Establish a `user` pack's binding by running its connect verb (RUNTIME §8).
    Connect(connect::Args),
    /// Remove the calling principal's binding for a pack's family (RUNTIME §8).
    Disconnect(connect::DisconnectArgs),
    /// Relay a pack's stimulus events as JSON lines (RUNTIME §8).
    Sense(sense::Args),
    /// Serve active packs as MCP tools over stdio.
    Mcp(mcp::Args),
    /// Check the store, the kernel's confinement and the installed bins.
    Doctor(doctor::Args),
    /// Check, hash and try the operator's Histos runtime policy (RUNTIME §7).
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Grant a call paused for confirmation or escalation by the runtime policy (owner only).
    Approve(approve::Args),
    /// Deny a call paused for escalation by the runtime policy (owner only).
    Deny(approve::DenyArgs),
    /// List calls paused for confirmation or escalation by the runtime policy (owner only).
    Approvals(approve::ListArgs),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Init(a) => init::run(a),
        Command::Lint(a) => lint::run(a),
        Command::Pack(c) => pack::run(c),
        Command::Install(a) => install::run_install(a),
        Command::Uninstall(a) => install::run_uninstall(a),
        Command::List(a) => list::run(a),
        Command::Show(a) => show::run(a),
        Command::Home(a) => home::run(a),
        Command::Activate(a) => activate::run_activate(a),
        Command::Deactivate(a) => activate::run_deactivate(a),
        Command::Exec(a) => exec::run(a),
        Command::Session(c) => session::run(c),
        Command::Grant(a) => grant::run_grant(a),
        Command::Revoke(a) => grant::run_revoke(a),
        Command::Config(c) => config::run(c),
        Command::State(c) => state::run(c),
        Command::Audit(c) => audit::run(c),
        Command::Connect(a) => connect::run(a),
        Command::Disconnect(a) => connect::run_disconnect(a),
        Command::Sense(a) => sense::run(a),
        Command::Mcp(a) => mcp::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Policy(c) => policy::run(c),
        Command::Approve(a) => approve::run(a),
        Command::Deny(a) => approve::run_deny(a),
        Command::Approvals(a) => approve::run_list(a),
    }
}
