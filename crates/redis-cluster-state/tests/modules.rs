//! The shape of the source the crate docs promise: no module of `src/` reaches itself
//! through the modules it names (`crate::x`), and no file is over 800 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of `src/` (lib.rs aside) and the other modules its code names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("src/") {
        let path = entry.expect("an entry").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
            let text = std::fs::read_to_string(&path).expect("a source file");
            files.insert(name.to_string(), text);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(name, text)| {
            // Code only: comments and doc comments name modules too.
            let code: String = text
                .lines()
                .map(|line| line.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            let mut named = BTreeSet::new();
            // `crate::x` anywhere, and the first segment of each path in `use crate::{…}`.
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let words: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => {
                        let group = group.split("};").next().unwrap_or_default();
                        group.split(',').collect()
                    }
                    None => vec![rest],
                };
                for word in words {
                    let first: String = word
                        .trim_start()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if modules.contains(&first) && first != *name {
                        named.insert(first);
                    }
                }
            }
            (name.clone(), named)
        })
        .collect()
}

#[test]
fn no_module_reaches_itself() {
    let graph = imports();
    assert!(graph.len() > 20, "read {} modules", graph.len());
    assert!(
        graph["cluster"].contains("topology"),
        "the scan sees imports: {:?}",
        graph["cluster"]
    );
    for start in graph.keys() {
        // Every module reachable from `start`, with the path that reached it.
        let mut paths: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut todo = vec![(start.as_str(), vec![start.as_str()])];
        while let Some((module, path)) = todo.pop() {
            for next in &graph[module] {
                let mut longer = path.clone();
                longer.push(next);
                assert_ne!(next, start, "a cycle: {}", longer.join(" -> "));
                if !paths.contains_key(next.as_str()) {
                    paths.insert(next, longer.clone());
                    todo.push((next, longer));
                }
            }
        }
    }
}

#[test]
fn no_file_is_over_800_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut read = 0;
    for entry in std::fs::read_dir(&src).expect("src/") {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("a source file");
        let lines = text.lines().count();
        assert!(lines <= 800, "{}: {lines} lines", path.display());
        read += 1;
    }
    assert!(read > 20, "read {read} files");
}
