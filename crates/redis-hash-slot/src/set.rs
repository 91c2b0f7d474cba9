//! [`SlotSet`]: the 16384-bit slot bitmap of the cluster bus.

use core::fmt;

use bitvec::{array::BitArray, order::Lsb0, slice::BitSlice};

use crate::{range::SlotRange, slot::Slot};

/// Size in bytes of the slot bitmap that the cluster bus carries (16384 bits).
pub const BITMAP_LEN: usize = 2048;

type Bits = BitArray<[u8; BITMAP_LEN], Lsb0>;

/// A set of slots, stored exactly as the cluster bus carries it (`myslots` in every message
/// header, `slots` in UPDATE): 2048 bytes, slot `s` is bit `s % 8`, least significant first, of
/// byte `s / 8`.
///
/// Every 2048-byte bitmap is a valid set, so [`SlotSet::from_bitmap`] cannot fail, and
/// [`SlotSet::as_bitmap`] hands the bytes back without copying.
///
/// ```
/// use redis_hash_slot::{Slot, SlotRange, SlotSet};
///
/// let mut set = SlotSet::new();
/// set.insert_range("0-5460".parse()?);
/// set.insert(Slot::new(10000).unwrap());
/// assert_eq!(set.len(), 5462);
/// assert_eq!(set.to_string(), "0-5460 10000");
/// assert_eq!(set.as_bitmap()[0], 0xff);
/// assert_eq!(SlotSet::from_bitmap(set.as_bitmap()), set);
/// # Ok::<(), redis_hash_slot::ParseSlotRangeError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SlotSet {
    bits: Bits,
}

impl SlotSet {
    /// The empty set.
    pub const fn new() -> Self {
        Self { bits: Bits::ZERO }
    }

    /// The set of all 16384 slots.
    pub const fn full() -> Self {
        Self::from_bitmap(&[0xff; BITMAP_LEN])
    }

    /// The set whose bitmap is `bitmap`, in the cluster bus's bit order.
    pub const fn from_bitmap(bitmap: &[u8; BITMAP_LEN]) -> Self {
        Self {
            bits: BitArray {
                _ord: core::marker::PhantomData,
                data: *bitmap,
            },
        }
    }

    /// The bitmap, in the cluster bus's bit order, borrowed without copying.
    pub const fn as_bitmap(&self) -> &[u8; BITMAP_LEN] {
        &self.bits.data
    }

    /// The set as a read-only [`SlotSetView`] of its bitmap.
    pub const fn view(&self) -> SlotSetView<'_> {
        SlotSetView::from_bitmap(self.as_bitmap())
    }

    /// The bitmap, in the cluster bus's bit order.
    pub const fn into_bitmap(self) -> [u8; BITMAP_LEN] {
        self.bits.data
    }

    /// Whether `slot` is in the set.
    pub fn contains(&self, slot: Slot) -> bool {
        self.view().contains(slot)
    }

    /// Adds `slot`; returns whether it was absent before.
    pub fn insert(&mut self, slot: Slot) -> bool {
        !self.bits.replace(slot.index(), true)
    }

    /// Removes `slot`; returns whether it was present before.
    pub fn remove(&mut self, slot: Slot) -> bool {
        self.bits.replace(slot.index(), false)
    }

    /// Adds every slot of `range`.
    pub fn insert_range(&mut self, range: SlotRange) {
        self.range_bits_mut(range).fill(true);
    }

    /// Removes every slot of `range`.
    pub fn remove_range(&mut self, range: SlotRange) {
        self.range_bits_mut(range).fill(false);
    }

    /// How many slots the set holds (0 to 16384).
    pub fn len(&self) -> usize {
        self.view().len()
    }

    /// Whether the set holds no slot.
    pub fn is_empty(&self) -> bool {
        self.view().is_empty()
    }

    /// Whether the set holds all 16384 slots.
    pub fn is_full(&self) -> bool {
        self.view().is_full()
    }

    /// The slots of the set, in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        self.view().iter()
    }

    /// The set's maximal runs of consecutive slots, in ascending order.
    ///
    /// Two equal sets give the same ranges, so they print the same `CLUSTER NODES` text.
    ///
    /// ```
    /// use redis_hash_slot::{Slot, SlotSet};
    ///
    /// let set: SlotSet = [1, 2, 3, 7, 9, 10].into_iter().filter_map(Slot::new).collect();
    /// let text: Vec<String> = set.ranges().map(|r| r.to_string()).collect();
    /// assert_eq!(text, ["1-3", "7", "9-10"]);
    /// ```
    pub fn ranges(&self) -> Ranges<'_> {
        self.view().ranges()
    }

    /// The slots that are in `self`, in `other` or in both.
    pub fn union(&self, other: &Self) -> Self {
        self.zip_with(other, |a, b| a | b)
    }

    /// The slots that are in both `self` and `other`.
    pub fn intersection(&self, other: &Self) -> Self {
        self.zip_with(other, |a, b| a & b)
    }

    /// The slots that are in `self` and not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        self.zip_with(other, |a, b| a & !b)
    }

    /// Whether every slot of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.as_bitmap()
            .iter()
            .zip(other.as_bitmap())
            .all(|(a, b)| a & !b == 0)
    }

    /// Whether `self` and `other` have no slot in common.
    pub fn is_disjoint(&self, other: &Self) -> bool {
        self.as_bitmap()
            .iter()
            .zip(other.as_bitmap())
            .all(|(a, b)| a & b == 0)
    }

    /// Byte by byte, so that the compiler can vectorise it.
    fn zip_with(&self, other: &Self, op: impl Fn(u8, u8) -> u8) -> Self {
        let mut out = [0u8; BITMAP_LEN];
        for ((o, a), b) in out.iter_mut().zip(self.as_bitmap()).zip(other.as_bitmap()) {
            *o = op(*a, *b);
        }
        Self::from_bitmap(&out)
    }

    fn range_bits_mut(&mut self, range: SlotRange) -> &mut BitSlice<u8, Lsb0> {
        // A `SlotRange` holds valid slots with start <= end, so this is in bounds.
        &mut self.bits[range.start().index()..=range.end().index()]
    }
}

impl Default for SlotSet {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlotSet {{{self}}}")
    }
}

/// The ranges separated by single spaces, as in a `CLUSTER NODES` line: `0-5460 10000`.
impl fmt::Display for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.view(), f)
    }
}

impl FromIterator<Slot> for SlotSet {
    fn from_iter<I: IntoIterator<Item = Slot>>(iter: I) -> Self {
        let mut set = Self::new();
        set.extend(iter);
        set
    }
}

impl FromIterator<SlotRange> for SlotSet {
    fn from_iter<I: IntoIterator<Item = SlotRange>>(iter: I) -> Self {
        let mut set = Self::new();
        set.extend(iter);
        set
    }
}

impl Extend<Slot> for SlotSet {
    fn extend<I: IntoIterator<Item = Slot>>(&mut self, iter: I) {
        for slot in iter {
            self.insert(slot);
        }
    }
}

impl Extend<SlotRange> for SlotSet {
    fn extend<I: IntoIterator<Item = SlotRange>>(&mut self, iter: I) {
        for range in iter {
            self.insert_range(range);
        }
    }
}

impl<'a> IntoIterator for &'a SlotSet {
    type Item = Slot;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl From<SlotSetView<'_>> for SlotSet {
    fn from(view: SlotSetView<'_>) -> Self {
        Self::from_bitmap(view.as_bitmap())
    }
}

impl From<SlotRange> for SlotSet {
    fn from(range: SlotRange) -> Self {
        let mut set = Self::new();
        set.insert_range(range);
        set
    }
}

/// A slot set read in place from a 2048-byte bitmap that someone else owns, such as the
/// `myslots` field of a cluster-bus message: nothing is copied.
///
/// ```
/// use redis_hash_slot::{Slot, SlotSet, SlotSetView};
///
/// let mut message = [0u8; 2048];
/// message[0] = 0b0000_0101; // slots 0 and 2
/// let view = SlotSetView::from_bitmap(&message);
/// assert_eq!(view.len(), 2);
/// assert!(view.contains(Slot::new(2).unwrap()));
/// assert_eq!(view.to_string(), "0 2");
/// assert_eq!(SlotSet::from(view).view(), view);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlotSetView<'a> {
    bitmap: &'a [u8; BITMAP_LEN],
}

impl<'a> SlotSetView<'a> {
    /// The set whose bitmap is `bitmap`, in the cluster bus's bit order.
    pub const fn from_bitmap(bitmap: &'a [u8; BITMAP_LEN]) -> Self {
        Self { bitmap }
    }

    /// The bitmap.
    pub const fn as_bitmap(self) -> &'a [u8; BITMAP_LEN] {
        self.bitmap
    }

    fn bits(self) -> &'a BitSlice<u8, Lsb0> {
        BitSlice::from_slice(self.bitmap)
    }

    /// Whether `slot` is in the set.
    pub fn contains(self, slot: Slot) -> bool {
        self.bits()[slot.index()]
    }

    /// How many slots the set holds (0 to 16384).
    pub fn len(self) -> usize {
        self.bits().count_ones()
    }

    /// Whether the set holds no slot.
    pub fn is_empty(self) -> bool {
        self.bits().not_any()
    }

    /// Whether the set holds all 16384 slots.
    pub fn is_full(self) -> bool {
        self.bits().all()
    }

    /// The slots of the set, in ascending order.
    pub fn iter(self) -> Iter<'a> {
        Iter {
            ones: self.bits().iter_ones(),
        }
    }

    /// The set's maximal runs of consecutive slots, in ascending order (see
    /// [`SlotSet::ranges`]).
    pub fn ranges(self) -> Ranges<'a> {
        Ranges {
            bits: self.bits(),
            next: 0,
        }
    }
}

impl fmt::Debug for SlotSetView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlotSetView {{{self}}}")
    }
}

/// The ranges separated by single spaces, as in a `CLUSTER NODES` line: `0-5460 10000`.
impl fmt::Display for SlotSetView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{range}")?;
        }
        Ok(())
    }
}

impl<'a> IntoIterator for SlotSetView<'a> {
    type Item = Slot;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// The slots of a [`SlotSet`], in ascending order; made by [`SlotSet::iter`].
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    ones: bitvec::slice::IterOnes<'a, u8, Lsb0>,
}

impl Iterator for Iter<'_> {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        self.ones.next().map(Slot::from_index)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ones.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Slot> {
        self.ones.next_back().map(Slot::from_index)
    }
}

/// The maximal runs of a [`SlotSet`], in ascending order; made by [`SlotSet::ranges`].
#[derive(Clone, Debug)]
pub struct Ranges<'a> {
    bits: &'a BitSlice<u8, Lsb0>,
    /// The first bit index not yet looked at.
    next: usize,
}

impl Iterator for Ranges<'_> {
    type Item = SlotRange;

    fn next(&mut self) -> Option<SlotRange> {
        let rest = self.bits.get(self.next..)?;
        let start = self.next + rest.first_one()?;
        let run = self.bits.get(start..)?;
        let end = start + run.first_zero().unwrap_or(run.len()) - 1;
        self.next = end + 1;
        SlotRange::new(Slot::from_index(start), Slot::from_index(end))
    }
}
