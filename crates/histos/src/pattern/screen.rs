//! The structural ReDoS screen over the parse tree (HISTOS-ENGINE §2d, stage 1).

use super::charset::CSet;
use super::parse::Node;
use super::{CAP, SPLIT_BUDGET};

#[derive(Debug, Clone, Copy)]
struct Sets {
    first: CSet,
    last: CSet,
    nullable: bool,
    unknown: bool,
}

fn seq_sets(seq: &[Node]) -> Sets {
    let mut first = CSet::empty();
    let mut unknown = false;
    let mut nullable = true;
    for n in seq {
        let s = node_sets(n);
        unknown |= s.unknown;
        if nullable {
            first = first.union(s.first);
        }
        if !s.nullable {
            nullable = false;
        }
    }
    let mut last = CSet::empty();
    for n in seq.iter().rev() {
        let s = node_sets(n);
        last = last.union(s.last);
        if !s.nullable {
            break;
        }
    }
    Sets {
        first,
        last,
        nullable,
        unknown,
    }
}

fn node_sets(n: &Node) -> Sets {
    match n {
        Node::Leaf { set, unknown, .. } => Sets {
            first: *set,
            last: *set,
            nullable: false,
            unknown: *unknown,
        },
        Node::Zero | Node::Look(_) => Sets {
            first: CSet::empty(),
            last: CSet::empty(),
            nullable: true,
            unknown: false,
        },
        Node::Branch(bs) => {
            let mut s = Sets {
                first: CSet::empty(),
                last: CSet::empty(),
                nullable: false,
                unknown: false,
            };
            for b in bs {
                let t = seq_sets(b);
                s.first = s.first.union(t.first);
                s.last = s.last.union(t.last);
                s.nullable |= t.nullable;
                s.unknown |= t.unknown;
            }
            s
        }
        Node::Repeat { min, body, .. } => {
            let mut s = seq_sets(body);
            s.nullable |= *min == 0;
            s
        }
        Node::Group(b) | Node::Atomic(b) => seq_sets(b),
        Node::Unknown(_) => Sets {
            first: CSet::all(),
            last: CSet::all(),
            nullable: true,
            unknown: true,
        },
    }
}

fn one_char(n: &Node) -> Option<CSet> {
    match n {
        Node::Leaf {
            set,
            unknown: false,
            ..
        } => Some(*set),
        Node::Group(b) if b.len() == 1 => one_char(&b[0]),
        _ => None,
    }
}

/// Flattens transparent groups so a body is a plain item list.
fn flat(seq: &[Node]) -> Vec<&Node> {
    let mut out = Vec::new();
    for n in seq {
        match n {
            Node::Group(b) => out.extend(flat(b)),
            n => out.push(n),
        }
    }
    out
}

fn anchored(body: &[&Node]) -> bool {
    let (Some(first), rest) = (body.first(), body.get(1..).unwrap_or(&[])) else {
        return false;
    };
    let Some(c) = one_char(first) else {
        return false;
    };
    let rest: Vec<Node> = rest.iter().map(|n| (*n).clone()).collect();
    let s = seq_sets(&rest);
    !rest.is_empty() && !s.nullable && !s.unknown && !c.intersects(s.first) && !c.intersects(s.last)
}

fn terminated(body: &[&Node]) -> bool {
    let Some((last, rest)) = body.split_last() else {
        return false;
    };
    let Some(c) = one_char(last) else {
        return false;
    };
    let rest: Vec<Node> = rest.iter().map(|n| (*n).clone()).collect();
    let s = seq_sets(&rest);
    !rest.is_empty() && !s.nullable && !s.unknown && !c.intersects(s.first) && !c.intersects(s.last)
}

fn variable(min: u32, max: Option<u32>) -> bool {
    max != Some(min)
}

fn multi(max: Option<u32>) -> bool {
    max.is_none_or(|m| m > 1)
}

fn cap(max: Option<u32>) -> f64 {
    f64::from(max.unwrap_or(CAP).min(CAP))
}

fn contains(seq: &[Node], pred: &dyn Fn(&Node) -> bool) -> bool {
    seq.iter().any(|n| {
        pred(n)
            || match n {
                Node::Branch(bs) => bs.iter().any(|b| contains(b, pred)),
                Node::Repeat { body, .. } => contains(body, pred),
                Node::Group(b) | Node::Atomic(b) | Node::Unknown(b) => contains(b, pred),
                Node::Look(_) | Node::Leaf { .. } | Node::Zero => false,
            }
    })
}

pub(super) fn screen(root: &[Node]) -> Result<(), &'static str> {
    nested(root)?;
    let mut charge = 0.0;
    adjacency(root, &mut charge)?;
    Ok(())
}

/// Rules 1 and 2: inside an ambiguous repeat, no variable repeat and no alternation.
fn nested(seq: &[Node]) -> Result<(), &'static str> {
    for n in seq {
        match n {
            Node::Repeat {
                min,
                max,
                body,
                possessive,
                ..
            } => {
                let f = flat(body);
                let ambiguous = !possessive
                    && variable(*min, *max)
                    && multi(*max)
                    && !anchored(&f)
                    && !terminated(&f);
                if ambiguous {
                    if contains(
                        body,
                        &|x| matches!(x, Node::Repeat { min, max, .. } if variable(*min, *max)),
                    ) {
                        return Err(
                            "a variable-length repeat nested inside another repeat, e.g. `(a+)+`",
                        );
                    }
                    if contains(body, &|x| matches!(x, Node::Branch(_))) {
                        return Err("an alternation inside a repeat, e.g. `(a|ab)*`");
                    }
                }
                nested(body)?;
            }
            Node::Branch(bs) => {
                for b in bs {
                    nested(b)?;
                }
            }
            Node::Group(b) | Node::Look(b) | Node::Atomic(b) | Node::Unknown(b) => nested(b)?,
            Node::Leaf { .. } | Node::Zero => {}
        }
    }
    Ok(())
}

struct Member {
    last: CSet,
    dot: bool,
    cap: f64,
    body: Vec<Node>,
}

const ADJACENT: &str =
    "two repeats in a row that can match the same character make every split a choice";

/// Rule 3: adjacent overlapping repeats, charged cumulatively (HISTOS-ENGINE §2d).
///
/// A run's cost is the product of its members' caps; a run whose first junction crosses
/// a held separator does not count its first member (the separator pins one boundary).
fn adjacency(seq: &[Node], charge: &mut f64) -> Result<(), &'static str> {
    let items = flat(seq);
    let mut pending: Vec<Member> = Vec::new();
    let mut held: Option<CSet> = None;
    let mut run_cost = 0.0f64;
    let mut run_open = false;
    macro_rules! reset {
        () => {{
            pending.clear();
            held = None;
            run_cost = 0.0;
            run_open = false;
        }};
    }
    for (idx, n) in items.iter().enumerate() {
        match n {
            Node::Zero | Node::Group(_) => {}
            Node::Look(b) => adjacency(b, charge)?,
            Node::Atomic(b) | Node::Unknown(b) => {
                adjacency(b, charge)?;
                reset!();
            }
            Node::Branch(bs) => {
                for b in bs {
                    adjacency(b, charge)?;
                }
                reset!();
            }
            Node::Leaf { set, .. } => {
                if pending.is_empty() {
                    continue;
                }
                if pending.iter().all(|m| !m.last.intersects(*set)) {
                    reset!();
                } else {
                    held = Some(held.map_or(*set, |h| h.union(*set)));
                }
            }
            Node::Repeat {
                min,
                max,
                body,
                possessive,
                greedy,
            } => {
                adjacency(body, charge)?;
                if *possessive {
                    reset!();
                    continue;
                }
                if !multi(*max) {
                    // `?` / `{0,1}` never join a run.
                    continue;
                }
                let f = flat(body);
                if anchored(&f) || terminated(&f) {
                    reset!();
                    continue;
                }
                let s = seq_sets(body);
                let is_dot = matches!(f.as_slice(), [Node::Leaf { dot: true, .. }]);
                let tail = items[idx + 1..].iter().all(|x| matches!(x, Node::Zero));
                if is_dot && *greedy && tail && !pending.iter().any(|m| m.dot) {
                    continue;
                }
                if !variable(*min, *max) {
                    // A fixed-count repeat has no movable boundary of its own.
                    if *min >= 1 && !pending.iter().any(|m| m.last.intersects(s.first)) {
                        reset!();
                    }
                    continue;
                }
                let me = Member {
                    last: s.last,
                    dot: is_dot,
                    cap: cap(*max),
                    body: body.clone(),
                };
                let old = run_cost;
                if let Some(h) = held.take() {
                    if !s.first.intersects(h) {
                        // Pinned: not charged; members that cannot absorb the separator drop.
                        pending.retain(|m| m.last.intersects(h));
                        pending.push(me);
                        continue;
                    }
                    if !pending.is_empty() {
                        run_cost = if run_open { run_cost * me.cap } else { me.cap };
                        run_open = true;
                    }
                } else {
                    let overlaps = pending.iter().any(|m| {
                        if s.unknown {
                            m.body == me.body
                        } else {
                            m.last.intersects(s.first)
                        }
                    });
                    if !overlaps {
                        if *min >= 1 {
                            reset!();
                        }
                        pending.push(me);
                        continue;
                    }
                    let prev = pending.last().map_or(1.0, |m| m.cap);
                    run_cost = if run_open {
                        run_cost * me.cap
                    } else {
                        prev * me.cap
                    };
                    run_open = true;
                }
                *charge += run_cost - old;
                pending.push(me);
                if *charge > SPLIT_BUDGET {
                    return Err(ADJACENT);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::error::PolicyCode;
    use crate::pattern::Pattern;

    fn refused(p: &str) -> bool {
        match Pattern::new(p) {
            Ok(_) => false,
            Err(e) => {
                assert_eq!(e.code, PolicyCode::UnsafePattern, "{p}: {e}");
                true
            }
        }
    }

    #[test]
    fn refuses_the_documented_shapes() {
        for p in [
            r"^(a+)+$",
            r"^([a-z]+)*$",
            r"^(?:[a-z]*-)*[a-z]*$",
            r"^Q(?:[a-z]+){1,40}$",
            r"^(a|ab)*$",
            r"(a|a)+",
            r"(?:ab|cd)+",
            r"\d+\d+",
            r"^[a-z]{1,512}[a-z]{1,512}[a-z]{1,512}$",
            r"^[a-z]{1,4000}[a-z]{1,4000}$",
            r"^.*.+$",
            r"^[a-z]+_?[a-z]+$",
            r"^.+,[^\n]+,[^\n]+$",
            r"^.+,\d+,.+,\d+,.+$",
            r"^(?:zz)+(?:zzz)+(?:zzzzz)+$",
            r"^[a-z]+[a-z0-9]*[a-z0-9._-]*@example\.com$",
            r"^[A-Za-z0-9]+[A-Za-z0-9_-]+[A-Za-z0-9]+$",
        ] {
            assert!(refused(p), "should refuse {p}");
        }
    }

    #[test]
    fn loads_the_documented_safe_shapes() {
        for p in [
            r"^(a+)?$",
            r"^\d+(?:,\d+)*$",
            r"(?:[^/]+/)*",
            r"^(?:[a-z]+[-_]){2,4}$",
            r"(a|b)*",
            r"^[a-z]{1,512}[a-z]{1,512}$",
            r"^\w{1,64}\w{1,64}$",
            r"^[a-z]+.*$",
            r"^\w+.+$",
            r"^\w+\s+\w+$",
            r"^[A-Za-z0-9.-]+\.[A-Za-z]{2,}$",
            r"^.+,[^\n]+$",
            r"^(?!.*\.\.)[A-Za-z0-9._-]+$",
            r"^ORD-[0-9]{1,10}$",
            r"^[a-z0-9_]+$",
        ] {
            assert!(!refused(p), "should load {p}");
        }
    }

    #[test]
    fn full_match_semantics() {
        let p = Pattern::new(r"[a-z]+").unwrap();
        assert_eq!(p.full_match("abc"), Some(true));
        assert_eq!(p.full_match("abc1"), Some(false));
        let alt = Pattern::new(r"a|ab").unwrap();
        assert_eq!(alt.full_match("ab"), Some(true));
        assert_eq!(p.full_match(&"a".repeat(5000)), None);
    }

    #[test]
    fn bad_pattern_is_invalid_field() {
        assert_eq!(
            Pattern::new("(").unwrap_err().code,
            PolicyCode::InvalidField
        );
    }
}
