//! Routing a single-key command allocates nothing: keys, slot and route, counted by the
//! global allocator that `redis-resp`'s allocation test also uses (its own test binary: a
//! global allocator is process-wide).

#[path = "../../redis-resp/tests/counting/mod.rs"]
mod counting;

use counting::allocations_during;
use redis_cluster_route::{CommandTable, Route, SlotAnswer};
use redis_hash_slot::key_slot;

#[test]
fn single_key_commands_route_without_allocating() {
    // The counter counts: a split does allocate.
    let split = allocations_during(|| {
        std::hint::black_box(CommandTable::REDIS_7_0.route(&["MGET", "a", "b"]).ok());
    });
    assert!(split > 0);
    let table = CommandTable::REDIS_7_0;
    let commands: [&[&[u8]]; 4] = [
        &[b"GET", b"user:1000"],
        &[b"set", b"user:1000", b"v", b"EX", b"10"],
        &[b"HGET", b"{user}:h", b"field"],
        &[b"EVAL", b"return 1", b"1", b"k"],
    ];
    for argv in commands {
        let expected = key_slot(argv[if argv[0] == b"EVAL" { 3 } else { 1 }]);
        let mut answers = (None, None, None);
        let allocations = allocations_during(|| {
            let keys = table.keys(argv).expect("known");
            answers = (
                Some(keys.slot(argv)),
                table.slot(argv).ok(),
                table.route(argv).ok(),
            );
        });
        assert_eq!(allocations, 0, "{argv:?}");
        assert_eq!(answers.0, Some(SlotAnswer::Slot(expected)));
        assert_eq!(answers.1, Some(SlotAnswer::Slot(expected)));
        assert_eq!(answers.2, Some(Route::Slot(expected)));
    }
}
