//! The pure exec gate of RUNTIME §5: target, principal, arguments, grants, land, confirm. No I/O.
