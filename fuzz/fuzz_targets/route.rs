//! Any argument list to any command: key extraction, routing, splitting and merging never
//! panic, every key position is inside the arguments, and a split's parts hold each
//! argument exactly once.
//!
//! Input: the first byte picks a command of the table (and the second, for a container, its
//! subcommand); the rest is the arguments, separated by spaces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_cluster_route::{CommandTable, Route};
use redis_resp::Frame;

fuzz_target!(|input: &[u8]| {
    let [pick, sub, rest @ ..] = input else {
        return;
    };
    let table = CommandTable::REDIS_7_0;
    let command = &table.commands()[usize::from(*pick) % table.commands().len()];
    let mut argv: Vec<&[u8]> = vec![command.name.as_bytes()];
    if !command.subcommands.is_empty() {
        let sub = &command.subcommands[usize::from(*sub) % command.subcommands.len()];
        argv.push(&sub.name.as_bytes()[command.name.len() + 1..]);
    }
    argv.extend(rest.split(|&b| b == b' '));

    for keys in [
        table.keys(&argv),
        table.routing_keys(&argv),
        table.command_getkeys(&argv),
    ]
    .into_iter()
    .flatten()
    {
        assert!(keys.positions().all(|at| at > 0 && at < argv.len()));
        assert_eq!(keys.positions().count(), keys.len());
        let _ = keys.slot(&argv);
    }
    if let Ok(Route::Split(split)) = table.route(&argv) {
        let mut seen = 0;
        let mut replies = Vec::new();
        for part in 0..split.parts().len() {
            let args: Vec<&&[u8]> = split.argv(part, &argv).collect();
            seen += args.len() - 1;
            replies.push(Frame::Array(
                split.parts()[part]
                    .groups
                    .iter()
                    .map(|_| Frame::Integer::<&[u8]>(1))
                    .collect(),
            ));
        }
        assert_eq!(seen, argv.len() - 1, "every argument in exactly one part");
        let _ = split.merge(replies);
    }
});
