//! The anchor beside the trail (RUNTIME §6): `audit/audit.anchor`, what the trail held
//! after the last append, so that a cut tail, an emptied or deleted trail and a replaced
//! one are told from a crash.
//!
//! The file is 1,024 bytes: two slots of 512, each one line: the JSON of the slot, a tab,
//! its MAC, spaces, `\n`. In this format (`"v":2`) the MAC is HMAC-SHA-256 under the
//! store's chain key ([`ChainKey::anchor_mac`], 64 hex digits), so an anchor cannot be
//! rewritten to match an edited trail without the key. Trails from before keyed chains
//! have `"v":1` slots checked by FNV-1a (16 hex digits), read only to migrate them.
//!
//! An update rewrites the slot of its generation (`generation % 2`) in place with one
//! `pwrite` (one page: a killed process never leaves half of it). A new anchor holds the
//! same content in both slots, so both slots are always valid. A slot that is not
//! (RUNTIME §6) is a torn write only when a power cut can have made it: the caller
//! ([`super::writer`], [`super::verify`]) accepts the other slot only when the anchor file
//! has not changed since this boot began and the intact slot names an earlier boot;
//! anything else is tampering (`anchor_mismatch`).
//!
//! A slot says two things. `point` is the last record written (count, head hash, end
//! offset), true in the boot that wrote it (`boot`): a process kill keeps every write in
//! the page cache. `durable` is the last record that was synced before the slot was
//! written, true after a power cut as well. Slots are written after the record they
//! describe, and never synced: a power cut can only make the anchor lag the trail, never
//! run ahead of it. `applied` is the log offset up to which the spends of intents are in
//! their caches (see `admit`), and `held` the outcomes the audit's reserve holds room for
//! (see `reserve`), both trusted in the same boot only. `ledger` is the newest generation
//! of the state ledger the trail's acts name, so that a ledger put back older than it is
//! found by the first read of it (`crate::ledger`), without reading the trail.

use super::key::ChainKey;
use super::record::GENESIS;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The anchor's file name inside `audit/`.
pub const ANCHOR_FILE: &str = "audit.anchor";
/// Bytes per slot.
const SLOT: usize = 512;
/// The format of a keyed anchor.
pub const KEYED: u32 = 2;
/// The format of an anchor from before keyed chains.
pub const LEGACY: u32 = 1;

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
    /// Format: 2 (keyed), or 1 for a trail not migrated yet.
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
    /// Outcomes the reserve holds room for: calls admitted and not ended (same boot only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<u64>,
    /// The newest generation of the state ledger (`state/ledger.json`) an `act made`
    /// record of the trail names ([`crate::ledger::MADE_FIELD`]): a ledger older than it
    /// was put back after the act, with the state files it vouched for
    /// ([`crate::ledger`]). `None` before the first such record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<u64>,
}

impl Anchor {
    /// The anchor of an empty trail.
    pub fn empty(boot: &str) -> Self {
        Self {
            v: KEYED,
            generation: 0,
            boot: boot.to_owned(),
            point: Point::genesis(),
            durable: Point::genesis(),
            applied: Some(0),
            held: None,
            ledger: None,
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

    /// The outcomes held in the reserve, as counted in `boot` (0 after a reboot: the calls
    /// of another boot have ended).
    pub fn held_in(&self, boot: &str) -> u64 {
        self.held.filter(|_| self.same_boot(boot)).unwrap_or(0)
    }

    /// One keyed slot: the anchor's JSON, a tab, its MAC under `key`, spaces, `\n`.
    fn slot_bytes(&self, key: &ChainKey) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        let mac = key.anchor_mac(&line);
        line.push(b'\t');
        line.extend_from_slice(mac.as_bytes());
        line.resize(SLOT - 1, b' ');
        line.push(b'\n');
        line
    }

    /// The generation a slot claims, read from its first bytes (the field order is fixed:
    /// `{"v":N,"generation":G,`), without checking it.
    fn claimed_generation(bytes: &[u8]) -> Option<u64> {
        let rest = bytes
            .strip_prefix(br#"{"v":"#)?
            .get(1..)?
            .strip_prefix(br#","generation":"#)?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
    }
}

/// How a slot reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// Its MAC (or legacy checksum) holds, or there is no key to check it with.
    Valid(Anchor),
    /// It is not a slot of a known format, or its MAC fails.
    Invalid(String),
}

/// The legacy checksum: FNV-1a (64 bits) of a slot's JSON, as 16 hex digits. It caught a
/// slot torn by a power cut; it was no seal (anyone who can write the file can redo it).
fn fnv(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Reads one slot. `key`: check a keyed slot's MAC; `None`: a keyed slot is read
/// unchecked (a verifier without the key reports the keyed parts `not_checked`).
fn parse_slot(bytes: &[u8], key: Option<&ChainKey>) -> Slot {
    let Some(tab) = bytes.iter().position(|&b| b == b'\t') else {
        return Slot::Invalid("no checksum".into());
    };
    let (json, rest) = (&bytes[..tab], &bytes[tab + 1..]);
    let a: Anchor = match serde_json::from_slice(json) {
        Ok(a) => a,
        Err(e) => return Slot::Invalid(format!("its content does not parse: {e}")),
    };
    match a.v {
        KEYED => {
            let Some(mac) = rest.get(..64) else {
                return Slot::Invalid("its MAC is cut short".into());
            };
            match key {
                Some(k) if !k.anchor_mac_holds(json, mac) => {
                    Slot::Invalid("its MAC does not hold under the store's chain key".into())
                }
                _ => Slot::Valid(a),
            }
        }
        LEGACY => {
            if rest.get(..16) == Some(fnv(json).as_bytes()) {
                Slot::Valid(a)
            } else {
                Slot::Invalid("its checksum does not hold".into())
            }
        }
        v => Slot::Invalid(format!("unknown anchor format {v}")),
    }
}

/// What the anchor file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorState {
    /// Both slots valid (the newer is the anchor), or a legacy anchor with one valid slot
    /// (that format's rule).
    Valid(Anchor),
    /// One slot valid, the other not: a torn write if a power cut can explain it, else
    /// tampering. The caller decides ([`SlotFault::recoverable`]).
    SlotFault(SlotFault),
    /// Neither slot is valid (the file was edited or cut).
    Damaged(String),
}

/// One slot of a keyed anchor that fails its MAC while the other holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotFault {
    /// The slot that holds.
    pub intact: Anchor,
    /// The index (0 or 1) of the one that does not.
    pub slot: usize,
    /// Why it does not, lowercase.
    pub why: String,
}

impl SlotFault {
    /// Whether a power cut explains the fault (RUNTIME §6): the anchor file has not
    /// changed since this boot began (`ctime_s` < `boot_began_s`, both in seconds since
    /// the epoch) and the intact slot names an earlier boot than `boot`.
    pub fn recoverable(&self, ctime_s: i64, boot: &str, boot_began_s: Option<i64>) -> bool {
        let before_boot = boot_began_s.is_some_and(|b| ctime_s < b);
        before_boot && !boot.is_empty() && !self.intact.same_boot(boot)
    }
}

/// Reads both slots of an open anchor file; a keyed slot is checked with `key` when given.
pub(crate) fn read(file: &File, key: Option<&ChainKey>) -> std::io::Result<AnchorState> {
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
    if got == 0 {
        return Ok(AnchorState::Damaged("the anchor file is empty".into()));
    }
    let slots: Vec<Slot> = buf.chunks(SLOT).map(|b| parse_slot(b, key)).collect();
    let legacy = slots
        .iter()
        .any(|s| matches!(s, Slot::Valid(a) if a.v == LEGACY));
    if legacy {
        // The legacy rule: the newest valid slot wins, a torn one is skipped (only the
        // newer claim is looked at first, as that format's reader did).
        let mut chunks: Vec<&[u8]> = buf.chunks(SLOT).collect();
        chunks.sort_by_key(|s| std::cmp::Reverse(Anchor::claimed_generation(s)));
        let best = chunks.into_iter().find_map(|b| match parse_slot(b, None) {
            Slot::Valid(a) if a.v == LEGACY => Some(a),
            _ => None,
        });
        return Ok(match best {
            Some(a) => AnchorState::Valid(a),
            None => AnchorState::Damaged(format!("no valid slot in its {got} bytes")),
        });
    }
    Ok(match slots.as_slice() {
        [Slot::Valid(a), Slot::Valid(b)] => {
            AnchorState::Valid(if b.generation > a.generation { b } else { a }.clone())
        }
        [Slot::Valid(a), Slot::Invalid(why)] | [Slot::Invalid(why), Slot::Valid(a)] => {
            let slot = usize::from(matches!(slots[0], Slot::Valid(_)));
            AnchorState::SlotFault(SlotFault {
                intact: a.clone(),
                slot,
                why: why.clone(),
            })
        }
        [Slot::Valid(a)] => AnchorState::SlotFault(SlotFault {
            intact: a.clone(),
            slot: 1,
            why: format!("the file ends after {got} bytes"),
        }),
        [Slot::Invalid(a), Slot::Invalid(b)] => {
            AnchorState::Damaged(format!("neither slot holds: {a}; {b}"))
        }
        _ => AnchorState::Damaged(format!("no valid slot in its {got} bytes")),
    })
}

/// The newest state ledger generation `home`'s trail names: what its anchor carries
/// ([`Anchor::ledger`], of the slot that is the anchor, or of the one that holds), and
/// any `act made` record after the anchor's point (a lag: an anchor put back older than
/// the trail, or a writer killed before it moved the anchor) names. `None` when there is
/// no anchor, it cannot be read or holds no slot (the trail's own checks report that),
/// or no act named a ledger yet. One `open`, one 1 KiB read and two HMACs, and the read
/// of the lag when there is one.
pub(crate) fn ledger_of(home: &crate::home::Home, key: &ChainKey) -> Option<u64> {
    let file = File::open(super::AuditLog::new(home).anchor_path()).ok()?;
    let a = match read(&file, Some(key)).ok()? {
        AnchorState::Valid(a) => a,
        AnchorState::SlotFault(f) => f.intact,
        AnchorState::Damaged(_) => return None,
    };
    let lag = crate::stamp::trail_last_made_from(home, crate::ledger::MADE_FIELD, a.point.end);
    a.ledger.max(lag)
}

/// Writes `a` into its slot (`a.generation % 2`) in place, keyed by `key`.
pub(crate) fn write(file: &File, a: &Anchor, key: &ChainKey) -> std::io::Result<()> {
    let offset = (a.generation % 2) * SLOT as u64;
    file.write_all_at(&a.slot_bytes(key), offset)
}

/// The bytes of a new anchor file: `a` in both slots (generations `a.generation` and one less
/// would collide, so the second slot holds the same content).
pub(crate) fn initial_bytes(a: &Anchor, key: &ChainKey) -> Vec<u8> {
    let s = a.slot_bytes(key);
    let mut out = s.clone();
    out.extend_from_slice(&s);
    out
}

/// The bytes of a legacy (`"v":1`) anchor of `a` in both slots (tests of migration).
pub fn legacy_bytes(a: &Anchor) -> Vec<u8> {
    let mut a = a.clone();
    a.v = LEGACY;
    a.held = None;
    let mut line = serde_json::to_vec(&a).unwrap_or_default();
    let sum = fnv(&line);
    line.push(b'\t');
    line.extend_from_slice(sum.as_bytes());
    line.resize(SLOT - 1, b' ');
    line.push(b'\n');
    let mut out = line.clone();
    out.extend_from_slice(&line);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn key() -> ChainKey {
        ChainKey::from_bytes([3; 32])
    }

    #[test]
    fn both_slots_hold_and_the_newer_wins() {
        let f = tempfile::tempfile().unwrap();
        let mut a = Anchor::empty("boot-1");
        f.write_all_at(&initial_bytes(&a, &key()), 0).unwrap();
        assert_eq!(
            read(&f, Some(&key())).unwrap(),
            AnchorState::Valid(a.clone())
        );
        a.generation = 1;
        a.point = Point {
            count: 1,
            head: "hmac-sha256:ab".into(),
            end: 10,
        };
        write(&f, &a, &key()).unwrap();
        assert_eq!(
            read(&f, Some(&key())).unwrap(),
            AnchorState::Valid(a.clone())
        );
        let older = a.clone();
        a.generation = 2;
        a.point.count = 2;
        write(&f, &a, &key()).unwrap();
        assert_eq!(
            read(&f, Some(&key())).unwrap(),
            AnchorState::Valid(a.clone())
        );
        // A torn slot 0 (generation 2) is a slot fault, the intact slot is generation 1.
        f.write_all_at(b"{\"v\":2,\"gen\":2,\"bo", 0).unwrap();
        let AnchorState::SlotFault(sf) = read(&f, Some(&key())).unwrap() else {
            panic!("not a slot fault")
        };
        assert_eq!((sf.intact, sf.slot), (older, 0));
    }

    #[test]
    fn a_slot_recomputed_without_the_key_fails_its_mac() {
        let a = Anchor::empty("b");
        let mut bytes = initial_bytes(&a, &key());
        let other = initial_bytes(&a, &ChainKey::from_bytes([4; 32]));
        bytes[..SLOT].copy_from_slice(&other[..SLOT]);
        let g = tempfile::tempfile().unwrap();
        g.write_all_at(&bytes, 0).unwrap();
        assert!(matches!(
            read(&g, Some(&key())).unwrap(),
            AnchorState::SlotFault(SlotFault { slot: 0, .. })
        ));
        g.write_all_at(&other, 0).unwrap();
        assert!(matches!(
            read(&g, Some(&key())).unwrap(),
            AnchorState::Damaged(_)
        ));
        // Without the key a keyed slot reads unchecked.
        assert!(matches!(read(&g, None).unwrap(), AnchorState::Valid(_)));
        let e = tempfile::tempfile().unwrap();
        assert!(matches!(
            read(&e, Some(&key())).unwrap(),
            AnchorState::Damaged(_)
        ));
    }

    #[test]
    fn a_legacy_anchor_reads_by_its_own_rule() {
        let mut a = Anchor::empty("b");
        a.v = LEGACY;
        a.point.count = 4;
        let f = tempfile::tempfile().unwrap();
        f.write_all_at(&legacy_bytes(&a), 0).unwrap();
        let AnchorState::Valid(r) = read(&f, Some(&key())).unwrap() else {
            panic!()
        };
        assert_eq!((r.v, r.point.count), (LEGACY, 4));
    }

    #[test]
    fn only_a_power_cut_explains_a_slot_fault() {
        let mut intact = Anchor::empty("old-boot");
        intact.generation = 5;
        let sf = SlotFault {
            intact,
            slot: 0,
            why: String::new(),
        };
        assert!(sf.recoverable(100, "new-boot", Some(200)));
        assert!(
            !sf.recoverable(300, "new-boot", Some(200)),
            "changed since boot"
        );
        assert!(
            !sf.recoverable(100, "old-boot", Some(200)),
            "this boot wrote it"
        );
        assert!(!sf.recoverable(100, "new-boot", None), "no boot time");
        assert!(!sf.recoverable(100, "", Some(200)), "no boot id");
    }

    #[test]
    fn unsynced_claims_hold_in_their_boot_only() {
        let mut a = Anchor::empty("b1");
        a.point.count = 5;
        a.durable.count = 4;
        a.held = Some(3);
        assert_eq!(a.trusted("b1").count, 5);
        assert_eq!(a.trusted("b2").count, 4);
        assert_eq!(a.trusted("").count, 4);
        assert_eq!(a.applied_in("b1"), Some(0));
        assert_eq!(a.applied_in("b2"), None);
        assert_eq!((a.held_in("b1"), a.held_in("b2")), (3, 0));
    }
}
