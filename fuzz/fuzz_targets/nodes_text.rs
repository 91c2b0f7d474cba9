//! Any text as a `CLUSTER NODES` reply and as a nodes.conf (issue 27): the line reader, the
//! route crate's slot map and the state machine's loader never panic, and what they accept
//! they write back in a form they read again to the same thing:
//! - a line that parses prints as a line that parses and prints the same;
//! - a nodes.conf that loads saves as a file that loads and saves the same; where it holds
//!   handshake nodes, which a save leaves out as the server's does, once more loaded and
//!   saved (a replica of such a node brings it back as a `noflags` entry).
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_cluster_bus::NodesLine;
use redis_cluster_route::SlotMap;
use redis_cluster_state::{ClusterNode, Config, Instant};

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    for line in text.lines() {
        let Ok(parsed) = NodesLine::parse(line) else {
            continue;
        };
        let _ = (parsed.node_id(), parsed.node_flags(), parsed.master);
        for token in parsed.slots() {
            let _ = token.map(|t| t.to_string());
        }
        let printed = parsed.to_string();
        let again = NodesLine::parse(&printed).unwrap_or_else(|e| {
            panic!("{line:?} prints as {printed:?}, which does not parse: {e}")
        });
        assert_eq!(again.to_string(), printed, "{line:?}");
    }

    let _ = SlotMap::from_cluster_nodes(text);

    let config = || Config::new("10.0.0.1", 7000);
    let now = Instant::from_millis(1_700_000_000_000);
    let reload = |text: &str| {
        ClusterNode::from_nodes_conf(config(), text, now)
            .unwrap_or_else(|e| panic!("{text:?} was saved, and does not load: {e}"))
    };
    if let Ok(mut node) = ClusterNode::from_nodes_conf(config(), text, now) {
        if node.nodes().any(|n| n.in_handshake()) {
            node = reload(&node.nodes_conf());
        }
        let saved = node.nodes_conf();
        assert_eq!(reload(&saved).nodes_conf(), saved, "{text:?}");
    }
});
