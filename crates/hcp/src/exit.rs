//! Exit statuses of `hcp` (RUNTIME §2, §5), in one place.

/// Success.
pub const OK: u8 = 0;
/// Refused: lint errors, a pack already installed without `--force`.
pub const REFUSED: u8 = 1;
/// Usage error outside `exec` (clap's own).
pub const USAGE: u8 = 2;
/// `exec` usage error.
pub const EX_USAGE: u8 = 64;
/// Bad arguments or envelope (`arg_*`, `tenant_in_args`, `bad_envelope`).
pub const EX_DATAERR: u8 = 65;
/// Unknown or inactive pack or verb; a pack that is not installed.
pub const EX_NOINPUT: u8 = 66;
/// The store cannot be used (`store_unusable`, `store_io`, `store_damaged`).
pub const EX_IOERR: u8 = 74;
/// Refused by the gate or by owner-only rules.
pub const EX_NOPERM: u8 = 77;
/// `timeout`.
pub const TIMEOUT: u8 = 124;
/// Bin not found (`bin_missing`); exec takes 126/127 from `AdapterError::exit_status`.
pub const BIN_MISSING: u8 = 127;
