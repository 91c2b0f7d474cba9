//! The glob patterns of KEYS, SCAN MATCH, PSUBSCRIBE and CONFIG GET, as the server reads
//! them: for a proxy that filters keys it gathered itself (a SCAN walked slot by slot).

/// Whether `text` matches the glob `pattern` as KEYS and SCAN MATCH read it: `*`, `?`,
/// `[abc]`, `[^a-z]`, and `\` to take the next byte as itself. Iterative, with one
/// backtracking point (the last `*`): time is at most pattern × text, whatever the pattern.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to go back to on a mismatch: after the last `*`, and the text it took up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if pattern.get(p) == Some(&b'*') {
            p += 1;
            star = Some((p, t));
            continue;
        }
        if let Some(next) = one(pattern, p, text[t]) {
            p = next;
            t += 1;
            continue;
        }
        match star {
            Some((after, taken)) => {
                p = after;
                t = taken + 1;
                star = Some((after, taken + 1));
            }
            None => return false,
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&b| b == b'*')
}

/// Whether the pattern item at `at` (not `*`) matches byte `c`; the position after it if so.
fn one(pattern: &[u8], at: usize, c: u8) -> Option<usize> {
    match pattern.get(at..)? {
        [] => None,
        [b'?', ..] => Some(at + 1),
        [b'\\', escaped, ..] => (*escaped == c).then_some(at + 2),
        [b'[', rest @ ..] => {
            let (negate, mut class, mut used) = match rest {
                [b'^', class @ ..] => (true, class, 2),
                _ => (false, rest, 1),
            };
            let mut matched = false;
            loop {
                match class {
                    [] => break, // an unclosed class runs to the end of the pattern
                    [b']', ..] => {
                        used += 1;
                        break;
                    }
                    [b'\\', e, more @ ..] => {
                        matched |= *e == c;
                        (class, used) = (more, used + 2);
                    }
                    [lo, b'-', hi, more @ ..] => {
                        let (lo, hi) = if lo <= hi { (*lo, *hi) } else { (*hi, *lo) };
                        matched |= (lo..=hi).contains(&c);
                        (class, used) = (more, used + 3);
                    }
                    [e, more @ ..] => {
                        matched |= *e == c;
                        (class, used) = (more, used + 1);
                    }
                }
            }
            (matched != negate).then_some(at + used)
        }
        [literal, ..] => (*literal == c).then_some(at + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        let cases: [(&[u8], &[u8], bool); 16] = [
            (b"*", b"", true),
            (b"*", b"abc", true),
            (b"a*c", b"abbbc", true),
            (b"a*c", b"abbb", false),
            (b"h?llo", b"hello", true),
            (b"h?llo", b"hllo", false),
            (b"h[ae]llo", b"hallo", true),
            (b"h[ae]llo", b"hillo", false),
            (b"h[^e]llo", b"hallo", true),
            (b"h[^e]llo", b"hello", false),
            (b"h[a-b]llo", b"hbllo", true),
            (b"h[b-a]llo", b"hallo", true),
            (b"a\\*b", b"a*b", true),
            (b"a\\*b", b"axb", false),
            (b"user:*:name", b"user:1:name", true),
            (b"*a*a*a*a*a*a*a*a*a*a*b", &[b'a'; 60], false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(glob_match(pattern, text), expected, "{pattern:?} {text:?}");
        }
    }
}
