//! Character sets of the ReDoS screen: ASCII exactly plus four non-ASCII buckets
//! (HISTOS-ENGINE §2d).

pub(super) const B_DIGIT: u8 = 1;
pub(super) const B_WORD: u8 = 2;
pub(super) const B_SPACE: u8 = 4;
pub(super) const B_OTHER: u8 = 8;
pub(super) const B_ALL: u8 = 15;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct CSet {
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) b: u8,
}

impl CSet {
    pub(super) fn empty() -> Self {
        Self::default()
    }
    pub(super) fn all() -> Self {
        CSet {
            lo: u64::MAX,
            hi: u64::MAX,
            b: B_ALL,
        }
    }
    pub(super) fn add(&mut self, c: u32) {
        if c < 64 {
            self.lo |= 1 << c;
        } else if c < 128 {
            self.hi |= 1 << (c - 64);
        } else if let Some(ch) = char::from_u32(c) {
            self.b |= if ch.is_numeric() {
                B_DIGIT
            } else if ch.is_alphanumeric() {
                B_WORD
            } else if ch.is_whitespace() {
                B_SPACE
            } else {
                B_OTHER
            };
        }
    }
    pub(super) fn add_range(&mut self, a: u32, z: u32) {
        for c in a..=z.min(127) {
            self.add(c);
        }
        if z >= 128 {
            self.b |= B_WORD | B_OTHER | if a <= 0x660 { B_DIGIT } else { 0 };
        }
    }
    pub(super) fn union(self, o: CSet) -> CSet {
        CSet {
            lo: self.lo | o.lo,
            hi: self.hi | o.hi,
            b: self.b | o.b,
        }
    }
    pub(super) fn intersects(self, o: CSet) -> bool {
        self.lo & o.lo != 0 || self.hi & o.hi != 0 || self.b & o.b != 0
    }
    pub(super) fn negate(self) -> CSet {
        CSet {
            lo: !self.lo,
            hi: !self.hi,
            b: B_ALL,
        }
    }
    pub(super) fn fold_case(mut self) -> CSet {
        for c in b'a'..=b'z' {
            let (l, u) = (c as u32, (c - 32) as u32);
            let has = |s: &CSet, x: u32| {
                if x < 64 {
                    s.lo >> x & 1 == 1
                } else {
                    s.hi >> (x - 64) & 1 == 1
                }
            };
            if has(&self, l) || has(&self, u) {
                self.add(l);
                self.add(u);
            }
        }
        self
    }
    pub(super) fn category(c: char) -> Option<CSet> {
        let mut s = CSet::empty();
        match c {
            'd' => {
                s.add_range('0' as u32, '9' as u32);
                s.b = B_DIGIT;
            }
            'w' => {
                s.add_range('0' as u32, '9' as u32);
                s.add_range('a' as u32, 'z' as u32);
                s.add_range('A' as u32, 'Z' as u32);
                s.add('_' as u32);
                s.b = B_DIGIT | B_WORD;
            }
            's' => {
                for c in [9u32, 10, 11, 12, 13, 28, 29, 30, 31, 32] {
                    s.add(c);
                }
                s.b = B_SPACE;
            }
            'D' => return CSet::category('d').map(CSet::negate),
            'W' => return CSet::category('w').map(CSet::negate),
            'S' => return CSet::category('s').map(CSet::negate),
            _ => return None,
        }
        Some(s)
    }
}
