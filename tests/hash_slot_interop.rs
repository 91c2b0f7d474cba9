//! `key_slot` against the real server's `CLUSTER KEYSLOT`, key by key.

mod support;

use redis_cluster_proto::hash_slot::key_slot;
use redis_cluster_proto::resp::Frame;
use support::RedisServer;

/// Keys whose answers the hash-tag rule has to get exactly right.
const EDGE_CASES: &[&[u8]] = &[
    b"",
    b"{",
    b"}",
    b"{}",
    b"}{",
    b"}{a}",
    b"{{a}}",
    b"a{}{b}",
    b"{a}{b}",
    b"{}{}",
    b"{{}}",
    b"{a",
    b"a}",
    b"{}a}",
    b"{a}}",
    b"{{{",
    b"}}}",
    b"{ }",
    b"{\x00}",
    b"\x00{\xff}\x00",
    b"\xff\xfe\xfd",
    b"123456789",
    b"foo",
    b"user1000",
    b"{user1000}.following",
    b"{user1000}.followers",
    b"foo{}{bar}",
    b"foo{{bar}}zap",
    b"foo{bar}{zap}",
    "{ключ}значение".as_bytes(),
];

/// splitmix64: a fixed, dependency-free stream of pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Binary keys, braces over-represented, mostly short, some up to 64 KiB.
    fn key(&mut self) -> Vec<u8> {
        let len = match self.below(100) {
            0..60 => self.below(33),
            60..85 => 33 + self.below(1024 - 33),
            85..98 => 1024 + self.below(8 * 1024),
            _ => 8 * 1024 + self.below(56 * 1024 + 1),
        } as usize;
        (0..len)
            .map(|_| match self.below(16) {
                0 => b'{',
                1 => b'}',
                _ => self.next() as u8,
            })
            .collect()
    }
}

#[test]
fn key_slot_matches_cluster_keyslot() {
    const RANDOM_KEYS: usize = 10_000;
    const BATCH: usize = 200;
    let server = RedisServer::start_cluster(&[]);
    let mut client = server.client();

    let mut rng = Rng(0x5eed_0fc1);
    let mut keys: Vec<Vec<u8>> = EDGE_CASES.iter().map(|k| k.to_vec()).collect();
    keys.push(vec![b'a'; 64 * 1024]);
    keys.push([&b"{"[..], &vec![b'x'; 64 * 1024 - 2], b"}"].concat());
    keys.extend((0..RANDOM_KEYS).map(|_| rng.key()));

    let mut mismatches = Vec::new();
    for batch in keys.chunks(BATCH) {
        let commands: Vec<[&[u8]; 3]> = batch
            .iter()
            .map(|key| [&b"CLUSTER"[..], b"KEYSLOT", key])
            .collect();
        let refs: Vec<&[&[u8]]> = commands.iter().map(|c| &c[..]).collect();
        client.send(&refs);
        for key in batch {
            let ours = i64::from(key_slot(key).get());
            match client.read_reply() {
                Frame::Integer(theirs) if theirs == ours => {}
                other => mismatches.push(format!(
                    "key of {} bytes starting {:?}: ours {ours}, server {other:?}",
                    key.len(),
                    String::from_utf8_lossy(&key[..key.len().min(40)])
                )),
            }
        }
    }
    assert!(keys.len() >= RANDOM_KEYS);
    assert!(
        mismatches.is_empty(),
        "{} of {} keys disagree with CLUSTER KEYSLOT:\n{}",
        mismatches.len(),
        keys.len(),
        mismatches.join("\n")
    );
}
