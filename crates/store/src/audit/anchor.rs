//! The anchor beside the trail (RUNTIME §6): `audit/audit.anchor`, what the trail held
//! after the last append, so that a cut tail, an emptied or deleted trail and a replaced
//! one are told from a crash.
//!
//! The file is 1,024 bytes: two slots of 512, each one line: the JSON of the slot, a tab,
//! a checksum (16 hex digits of FNV-1a), spaces, `\n`. An update rewrites the slot of its generation
//! (`generation % 2`) in place with one `pwrite` (one page: a killed process never leaves half
//! of it), so a torn slot, were a power cut to tear one, leaves the other. The reader
//! takes the valid slot with the higher generation.
//!
//! A slot says two things. `point` is the last record written (count, head hash, end
//! offset), true in the boot that wrote it (`boot`): a process kill keeps every write in
//! the page cache. `durable` is the last record that was synced before the slot was
//! written, true after a power cut as well. Slots are written after the record they
//! describe, and never synced: a power cut can only make the anchor lag the trail, never
//! run ahead of it. `applied` is the log offset up to which the spends of intents are in
//! their caches (see `admit`), trusted in the same boot only.

use super::record::GENESIS;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The anchor's file name inside `audit/`.
pub const ANCHOR_FILE: &str = "audit.anchor";
/// Bytes per slot.
const SLOT: usize = 512;

/// A position in the trail: how many records, the last one's hash, where it ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// Records up to and including this one.
    pub count: u64,
    /// The last record's `hash` ([`GENESIS`] when `count` is 0).
    pub head: String,
    /// The byte offset just after its `\n`.
    pub end: u64,
}

impl Point {
    /// The empty trail.
    pub fn genesis() -> Self {
        Self {
            count: 0,
            head: GENESIS.to_owned(),
            end: 0,
        }
    }
}

/// One slot's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// Format, 1.
    pub v: u32,
    /// Generation: one more on every write.
    pub generation: u64,
    /// The boot id of the machine when it was written.
    pub boot: String,
    /// The last record written.
    pub point: Point,
    /// The last record known synced when it was written.
    pub durable: Point,
    /// Spends of intents before this offset are in their caches (same boot only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<u64>,
}

impl Anchor {
    /// The anchor of an empty trail.
    pub fn empty(boot: &str) -> Self {
        Self {
            v: 1,
            generation: 0,
            boot: boot.to_owned(),
            point: Point::genesis(),
            durable: Point::genesis(),
            applied: Some(0),
        }
    }

    /// What the anchor vouches for in boot `boot`: the last record written when it is
    /// the boot that wrote it, else the last record synced.
    pub fn trusted(&self, boot: &str) -> &Point {
        if self.same_boot(boot) {
            &self.point
        } else {
            &self.durable
        }
    }

    /// Whether `boot` is the boot that wrote this anchor (and a boot id is known).
    pub fn same_boot(&self, boot: &str) -> bool {
        !boot.is_empty() && self.boot == boot
    }

    /// The spend watermark, when it can be trusted in `boot`.
    pub fn applied_in(&self, boot: &str) -> Option<u64> {
        self.applied.filter(|_| self.same_boot(boot))
    }

    /// One slot: the anchor's JSON, a tab, its checksum ([`check`], 16 hex digits),
    /// spaces, `\n`.
    fn slot_bytes(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        let sum = check(&line);
        line.push(b'\t');
        line.extend_from_slice(sum.as_bytes());
        line.resize(SLOT - 1, b' ');
        line.push(b'\n');
        line
    }

    /// The slot's JSON when its checksum holds.
    fn checked_json(bytes: &[u8]) -> Option<&[u8]> {
        let tab = bytes.iter().position(|&b| b == b'\t')?;
        let (json, rest) = (&bytes[..tab], &bytes[tab + 1..]);
        (rest.get(..16)? == check(json).as_bytes()).then_some(json)
    }

    /// The generation a slot claims, read from its first bytes (the field order is fixed:
    /// `{"v":1,"generation":N,`), without checking it.
    fn claimed_generation(bytes: &[u8]) -> Option<u64> {
        let rest = bytes.strip_prefix(br#"{"v":1,"generation":"#)?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
    }

    fn parse_slot(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(Self::checked_json(bytes)?).ok()
    }
}

/// The checksum of a slot: FNV-1a (64 bits) of its JSON, as 16 hex digits. It catches a
/// slot torn by a power cut; it is no seal (anyone who can write the file can redo it).
fn check(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What the anchor file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorState {
    /// A valid slot.
    Valid(Anchor),
    /// Neither slot is valid (the file was edited or cut).
    Damaged(String),
}

/// Reads both slots of an open anchor file.
pub(crate) fn read(file: &File) -> std::io::Result<AnchorState> {
    let mut buf = vec![0u8; 2 * SLOT];
    let mut got = 0;
    while got < buf.len() {
        let n = file.read_at(&mut buf[got..], got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    // The newer slot first; only the slot taken is checked and parsed (an update touches
    // one slot, so the other is the fallback when the newer one is torn).
    let mut slots: Vec<&[u8]> = buf.chunks(SLOT).collect();
    slots.sort_by_key(|s| std::cmp::Reverse(Anchor::claimed_generation(s)));
    let best = slots.into_iter().find_map(Anchor::parse_slot);
    Ok(match best {
        Some(a) if a.v == 1 => AnchorState::Valid(a),
        Some(a) => AnchorState::Damaged(format!("unknown anchor format {}", a.v)),
        None if got == 0 => AnchorState::Damaged("the anchor file is empty".into()),
        None => AnchorState::Damaged(format!("no valid slot in its {got} bytes")),
    })
}

/// Writes `a` into its slot (`a.generation % 2`) in place.
pub(crate) fn write(file: &File, a: &Anchor) -> std::io::Result<()> {
    let offset = (a.generation % 2) * SLOT as u64;
    file.write_all_at(&a.slot_bytes(), offset)
}

/// The bytes of a new anchor file: `a` in both slots (generations `a.generation` and one less
/// would collide, so the second slot holds the same content).
pub(crate) fn initial_bytes(a: &Anchor) -> Vec<u8> {
    let s = a.slot_bytes();
    let mut out = s.clone();
    out.extend_from_slice(&s);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_valid_slot_wins_and_a_torn_one_is_skipped() {
        let f = tempfile::tempfile().unwrap();
        let mut a = Anchor::empty("boot-1");
        f.write_all_at(&initial_bytes(&a), 0).unwrap();
        assert_eq!(read(&f).unwrap(), AnchorState::Valid(a.clone()));
        a.generation = 1;
        a.point = Point {
            count: 1,
            head: "sha256:ab".into(),
            end: 10,
        };
        write(&f, &a).unwrap();
        assert_eq!(read(&f).unwrap(), AnchorState::Valid(a.clone()));
        let older = a.clone();
        a.generation = 2;
        a.point.count = 2;
        write(&f, &a).unwrap();
        assert_eq!(read(&f).unwrap(), AnchorState::Valid(a.clone()));
        // Tear slot 0 (generation 2): slot 1 (generation 1) is what the anchor says.
        f.write_all_at(b"{\"v\":1,\"gen\":2,\"bo", 0).unwrap();
        assert_eq!(read(&f).unwrap(), AnchorState::Valid(older));
        // An edited value fails its checksum.
        let mut bytes = initial_bytes(&a);
        let text = String::from_utf8(bytes.clone())
            .unwrap()
            .replace("\"count\":2", "\"count\":9");
        bytes = text.into_bytes();
        let g = tempfile::tempfile().unwrap();
        g.write_all_at(&bytes, 0).unwrap();
        assert!(matches!(read(&g).unwrap(), AnchorState::Damaged(_)));
        let e = tempfile::tempfile().unwrap();
        assert!(matches!(read(&e).unwrap(), AnchorState::Damaged(_)));
    }

    #[test]
    fn unsynced_claims_hold_in_their_boot_only() {
        let mut a = Anchor::empty("b1");
        a.point.count = 5;
        a.durable.count = 4;
        assert_eq!(a.trusted("b1").count, 5);
        assert_eq!(a.trusted("b2").count, 4);
        assert_eq!(a.trusted("").count, 4);
        assert_eq!(a.applied_in("b1"), Some(0));
        assert_eq!(a.applied_in("b2"), None);
    }
}
