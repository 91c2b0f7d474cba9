//! The crate's behaviour through its public API: table-driven cases, then properties.

use proptest::prelude::*;
use redis_hash_slot::{
    BITMAP_LEN, ParseSlotError, ParseSlotRangeError, SLOT_COUNT, Slot, SlotRange, SlotSet,
    SlotSetView, hash_tag, key_slot,
};

/// CRC16/XMODEM one bit at a time, straight from its definition, as an independent reference.
fn reference_crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

fn slot(n: u16) -> Slot {
    Slot::new(n).expect("test slot below 16384")
}

#[test]
fn specification_examples() {
    assert_eq!(reference_crc16(b"123456789"), 0x31c3);
    assert_eq!(key_slot(b"123456789").get(), 12739);
    let user = key_slot(b"user1000");
    assert_eq!(key_slot(b"{user1000}.following"), user);
    assert_eq!(key_slot(b"{user1000}.followers"), user);
    assert_eq!(u16::from(key_slot(b"foo")), 12182);
}

#[test]
fn hash_tag_rules() {
    // (key, hashed part): the server's keyHashSlot, case by case.
    let cases: &[(&[u8], &[u8])] = &[
        (b"", b""),
        (b"foo", b"foo"),
        (b"{}", b"{}"),
        (b"{", b"{"),
        (b"}", b"}"),
        (b"}{", b"}{"),
        (b"}{a}", b"a"),
        (b"{{a}}", b"{a"),
        (b"a{}{b}", b"a{}{b}"),
        (b"{a}{b}", b"a"),
        (b"{user1000}.following", b"user1000"),
        (b"foo{bar", b"foo{bar"),
        (b"foo{bar}", b"bar"),
        (b"foo{{bar}}zap", b"{bar"),
        (b"{}{user1000}", b"{}{user1000}"),
        (b"x{\xff\x00}y", b"\xff\x00"),
        (b"0123456789abcdef{tag}", b"tag"),
        (b"0123456789abcdef{0123456789abcdef}", b"0123456789abcdef"),
        (b"0123456{89abcdef}", b"89abcdef"),
    ];
    for &(key, tag) in cases {
        assert_eq!(hash_tag(key), tag, "key {key:?}");
        assert_eq!(
            key_slot(key).get(),
            reference_crc16(tag) % SLOT_COUNT,
            "key {key:?}"
        );
    }
}

#[test]
fn slot_bounds() {
    assert_eq!(Slot::new(0), Some(Slot::MIN));
    assert_eq!(Slot::new(16383), Some(Slot::MAX));
    assert_eq!(Slot::new(16384), None);
    assert_eq!(Slot::new(u16::MAX), None);
    assert_eq!(Slot::all().len(), 16384);
    assert!(Slot::all().zip(Slot::all().skip(1)).all(|(a, b)| a < b));
    assert_eq!(usize::from(Slot::MAX), 16383);
}

#[test]
fn slot_and_range_parsing() {
    let ok: &[(&str, u16, u16)] = &[
        ("0", 0, 0),
        ("7", 7, 7),
        ("16383", 16383, 16383),
        ("0-5460", 0, 5460),
        ("5461-10922", 5461, 10922),
        ("0-16383", 0, 16383),
        ("9-9", 9, 9),
    ];
    for &(text, start, end) in ok {
        let range: SlotRange = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            (range.start().get(), range.end().get()),
            (start, end),
            "{text}"
        );
        assert_eq!(range.len(), end - start + 1);
    }
    use ParseSlotError::*;
    use ParseSlotRangeError::{End, Reversed, Start};
    let bad: &[(&str, ParseSlotRangeError)] = &[
        ("", Start(Empty)),
        ("-", Start(Empty)),
        ("-5", Start(Empty)),
        ("5-", End(Empty)),
        ("01", Start(LeadingZero)),
        ("00", Start(LeadingZero)),
        ("1-02", End(LeadingZero)),
        ("+1", Start(InvalidDigit)),
        (" 1", Start(InvalidDigit)),
        ("1 ", Start(InvalidDigit)),
        ("1-2-3", End(InvalidDigit)),
        ("a", Start(InvalidDigit)),
        ("16384", Start(OutOfRange)),
        ("0-16384", End(OutOfRange)),
        ("99999999999999999999", Start(OutOfRange)),
        (
            "10-9",
            Reversed {
                start: slot(10),
                end: slot(9),
            },
        ),
    ];
    for (text, expected) in bad {
        assert_eq!(text.parse::<SlotRange>(), Err(*expected), "{text:?}");
        assert_eq!(SlotRange::from_ascii(text.as_bytes()), Err(*expected));
    }
    assert_eq!(
        SlotRange::from_ascii(b"1\xff"),
        Err(Start(InvalidDigit)),
        "non-UTF-8 bytes"
    );
    assert_eq!(
        Start(LeadingZero).to_string(),
        "bad start of slot range: slot number has a leading zero"
    );
}

#[test]
fn range_display_and_iteration() {
    assert_eq!(SlotRange::ALL.to_string(), "0-16383");
    assert_eq!(SlotRange::from(slot(7)).to_string(), "7");
    assert_eq!(SlotRange::new(slot(3), slot(2)), None);
    let range = SlotRange::new(slot(3), slot(6)).expect("3 <= 6");
    let slots: Vec<u16> = range.into_iter().map(Slot::get).collect();
    assert_eq!(slots, [3, 4, 5, 6]);
    assert!(range.contains(slot(3)) && range.contains(slot(6)));
    assert!(!range.contains(slot(2)) && !range.contains(slot(7)));
    assert_eq!(SlotRange::ALL.into_iter().count(), 16384);
}

#[test]
fn slot_set_bit_layout_is_the_bus_layout() {
    let mut set = SlotSet::new();
    assert!(set.is_empty());
    assert!(set.insert(slot(0)));
    assert!(!set.insert(slot(0)), "second insert reports presence");
    set.insert(slot(9));
    set.insert(slot(16383));
    let bitmap = set.as_bitmap();
    assert_eq!(bitmap[0], 0b0000_0001);
    assert_eq!(bitmap[1], 0b0000_0010);
    assert_eq!(bitmap[BITMAP_LEN - 1], 0b1000_0000);
    assert_eq!(bitmap.iter().filter(|&&b| b != 0).count(), 3);
    assert_eq!(set.len(), 3);
    assert!(set.remove(slot(9)));
    assert!(!set.remove(slot(9)));
    assert!(!set.contains(slot(9)));
    assert_eq!(set.to_string(), "0 16383");
    assert!(SlotSet::full().is_full());
    assert_eq!(SlotSet::full().to_string(), "0-16383");
    assert_eq!(SlotSet::full().len(), 16384);
    assert_eq!(
        format!("{:?}", SlotSet::from(SlotRange::from(slot(4)))),
        "SlotSet {4}"
    );
    assert_eq!(SlotSet::default(), SlotSet::new());
}

#[test]
fn slot_set_ranges_of_a_real_three_master_layout() {
    let text = "0-5460 5461-10922 10923-16383";
    let set: SlotSet = text
        .split(' ')
        .map(|r| r.parse::<SlotRange>().expect("range"))
        .collect();
    assert!(set.is_full());
    assert_eq!(
        set.ranges().count(),
        1,
        "adjacent ranges merge into one run"
    );
    let mut set = set;
    set.remove_range("100-199".parse().expect("range"));
    assert_eq!(set.to_string(), "0-99 200-16383");
}

fn arb_set() -> impl Strategy<Value = SlotSet> {
    // Runs of ones and zeros make ranges likelier than uniformly random bits would.
    prop_oneof![
        proptest::collection::vec(any::<u8>(), BITMAP_LEN),
        proptest::collection::vec(prop_oneof![Just(0u8), Just(0xff), any::<u8>()], BITMAP_LEN),
        proptest::collection::vec(prop_oneof![9 => Just(0u8), 1 => any::<u8>()], BITMAP_LEN),
    ]
    .prop_map(|bytes| {
        let mut bitmap = [0u8; BITMAP_LEN];
        bitmap.copy_from_slice(&bytes);
        SlotSet::from_bitmap(&bitmap)
    })
}

fn arb_key() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![4 => any::<u8>(), 1 => Just(b'{'), 1 => Just(b'}')];
    prop_oneof![
        proptest::collection::vec(byte.clone(), 0..40),
        proptest::collection::vec(byte, 0..2000),
    ]
}

proptest! {
    #[test]
    fn key_slot_is_crc16_of_the_tag_and_below_16384(key in arb_key()) {
        let slot = key_slot(&key);
        prop_assert!(slot.get() < SLOT_COUNT);
        prop_assert_eq!(slot.get(), reference_crc16(hash_tag(&key)) & 0x3fff);
    }

    #[test]
    fn hash_tag_is_a_part_of_the_key(key in arb_key()) {
        let tag = hash_tag(&key);
        prop_assert!(tag == key.as_slice() || !tag.is_empty());
        let closes = tag.contains(&b'}');
        prop_assert!(!closes || tag == key.as_slice());
        prop_assert!(key.windows(tag.len().max(1)).any(|w| w == tag) || tag.is_empty());
    }

    #[test]
    fn a_key_with_a_tag_maps_like_its_tag(
        prefix in proptest::collection::vec(any::<u8>().prop_filter("no {", |b| *b != b'{'), 0..20),
        tag in proptest::collection::vec(any::<u8>().prop_filter("no }", |b| *b != b'}'), 1..40),
        suffix in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        let key = [&prefix[..], b"{", &tag[..], b"}", &suffix[..]].concat();
        prop_assert_eq!(hash_tag(&key), tag.as_slice());
        prop_assert_eq!(key_slot(&key), key_slot(&tag));
    }

    #[test]
    fn set_bitmap_ranges_round_trip(set in arb_set()) {
        prop_assert_eq!(&SlotSet::from_bitmap(set.as_bitmap()), &set);
        // A view of someone else's bitmap reads the same set, in place.
        let bytes: [u8; BITMAP_LEN] = *set.as_bitmap();
        let view = SlotSetView::from_bitmap(&bytes);
        prop_assert_eq!(view.len(), set.len());
        prop_assert_eq!(view.to_string(), set.to_string());
        prop_assert_eq!(&SlotSet::from(view), &set);
        let ranges: Vec<SlotRange> = set.ranges().collect();
        // Sorted and maximal: each run ends at least one slot before the next starts.
        for pair in ranges.windows(2) {
            prop_assert!(pair[0].end().get() + 1 < pair[1].start().get());
        }
        let total: usize = ranges.iter().map(|r| usize::from(r.len())).sum();
        prop_assert_eq!(total, set.len());
        prop_assert_eq!(&ranges.iter().copied().collect::<SlotSet>(), &set);
        let reparsed: SlotSet = set
            .to_string()
            .split(' ')
            .filter(|t| !t.is_empty())
            .map(|t| t.parse::<SlotRange>())
            .collect::<Result<_, _>>()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&reparsed, &set);
        let by_bits: Vec<Slot> = Slot::all()
            .filter(|s| set.as_bitmap()[usize::from(*s) / 8] >> (s.get() % 8) & 1 == 1)
            .collect();
        prop_assert_eq!(set.iter().collect::<Vec<_>>(), by_bits.clone());
        prop_assert_eq!(set.iter().rev().collect::<Vec<_>>(), by_bits.into_iter().rev().collect::<Vec<_>>());
        prop_assert_eq!(set.is_empty(), set.iter().next().is_none());
    }

    #[test]
    fn set_algebra_matches_slot_by_slot_logic(a in arb_set(), b in arb_set()) {
        let (union, inter, diff) = (a.union(&b), a.intersection(&b), a.difference(&b));
        for s in Slot::all() {
            prop_assert_eq!(union.contains(s), a.contains(s) || b.contains(s));
            prop_assert_eq!(inter.contains(s), a.contains(s) && b.contains(s));
            prop_assert_eq!(diff.contains(s), a.contains(s) && !b.contains(s));
        }
        prop_assert!(inter.is_subset(&a) && inter.is_subset(&b) && a.is_subset(&union));
        prop_assert_eq!(a.is_disjoint(&b), inter.is_empty());
        prop_assert_eq!(a.is_subset(&b), diff.is_empty());
    }

    #[test]
    fn range_text_round_trips(start in 0u16..SLOT_COUNT, len in 0u16..SLOT_COUNT) {
        let end = start.saturating_add(len).min(SLOT_COUNT - 1);
        let range = SlotRange::new(slot(start), slot(end)).expect("start <= end");
        prop_assert_eq!(range.to_string().parse::<SlotRange>(), Ok(range));
        let mut set = SlotSet::new();
        set.insert_range(range);
        prop_assert_eq!(set.ranges().collect::<Vec<_>>(), vec![range]);
        set.remove_range(range);
        prop_assert!(set.is_empty());
    }
}
