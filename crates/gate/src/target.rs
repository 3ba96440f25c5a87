//! Step 1 of RUNTIME §5: what a TARGET may mean, and suggestions on a miss.

/// The `(pack_id, verb_key)` readings of `target`, most specific pack first: the text
/// before each `.` as a pack id with the rest as the verb key, then (for verb keys that
/// repeat the pack id, like `mail.send` in pack `mail`) the prefix with the whole target.
/// `mail.send` reads as `("mail", "send")` then `("mail", "mail.send")`.
pub fn readings(target: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    for (i, _) in target.match_indices('.') {
        let (pack, verb) = (&target[..i], &target[i + 1..]);
        if !pack.is_empty() && !verb.is_empty() {
            out.push((pack, verb));
            out.push((pack, target));
        }
    }
    out
}

/// Up to three of `known` (`PACK.VERB` strings) closest to `target` by edit distance,
/// those within a third of the target's length, closest first.
pub fn suggest<'a>(target: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let limit = (target.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = known
        .into_iter()
        .map(|k| {
            let verb = k.rsplit_once('.').map_or(k, |(_, v)| v);
            (levenshtein(target, k).min(levenshtein(target, verb)), k)
        })
        .filter(|(d, _)| *d <= limit)
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(3)
        .map(|(_, k)| k.to_owned())
        .collect()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn readings_of_dotted_targets() {
        assert_eq!(
            readings("transit.find"),
            vec![("transit", "find"), ("transit", "transit.find")]
        );
        assert_eq!(
            readings("mail.mail.send"),
            vec![
                ("mail", "mail.send"),
                ("mail", "mail.mail.send"),
                ("mail.mail", "send"),
                ("mail.mail", "mail.mail.send")
            ]
        );
        assert!(readings("find").is_empty());
        assert!(readings(".x").is_empty());
    }

    #[test]
    fn suggestions() {
        let known = ["transit.find", "transit.plan", "ledger.post"];
        assert_eq!(suggest("transit.fnd", known), vec!["transit.find"]);
        assert_eq!(suggest("fnd", known), vec!["transit.find"]);
        assert!(suggest("zzzzzzzz", known).is_empty());
    }
}
