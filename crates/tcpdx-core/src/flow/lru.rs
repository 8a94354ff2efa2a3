//! Connection slots in order of last activity: O(1) touch, O(1) least recently active.
//!
//! An intrusive doubly-linked list over slot indexes (a `Vec` of links, no allocation per
//! touch), so that `--max-flows` can evict the least recently active connection without
//! scanning the table. A touch of the most recent slot (every segment of a bulk transfer)
//! is one comparison.

/// No slot.
const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u32,
    next: u32,
}

/// Slots `0..len()` from least to most recently touched.
#[derive(Debug)]
pub struct Lru {
    links: Vec<Link>,
    /// Least recently touched.
    head: u32,
    /// Most recently touched.
    tail: u32,
}

impl Default for Lru {
    fn default() -> Self {
        Self {
            links: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }
}

impl Lru {
    /// Largest number of slots (slot indexes are `u32`, one value is the list end).
    pub const MAX_SLOTS: usize = (u32::MAX - 1) as usize;

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// True if there is no slot.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Adds the next slot (index `len()`) as the most recent; None when `MAX_SLOTS` are in use.
    pub fn push(&mut self) -> Option<usize> {
        let slot = u32::try_from(self.links.len()).ok().filter(|&s| s != NIL)?;
        self.links.push(Link {
            prev: self.tail,
            next: NIL,
        });
        match self.link_mut(self.tail) {
            Some(t) => t.next = slot,
            None => self.head = slot,
        }
        self.tail = slot;
        Some(slot as usize)
    }

    /// Makes `slot` the most recently touched (no-op for an unknown slot).
    #[inline]
    pub fn touch(&mut self, slot: usize) {
        let Ok(s) = u32::try_from(slot) else {
            return;
        };
        if s == self.tail {
            return;
        }
        let Some(&Link { prev, next }) = self.links.get(slot) else {
            return;
        };
        // Unlink (s is not the tail, so `next` is a slot).
        match self.link_mut(prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        if let Some(n) = self.link_mut(next) {
            n.prev = prev;
        }
        // Append.
        let tail = self.tail;
        if let Some(t) = self.link_mut(tail) {
            t.next = s;
        }
        if let Some(l) = self.link_mut(s) {
            *l = Link {
                prev: tail,
                next: NIL,
            };
        }
        self.tail = s;
    }

    /// The least recently touched slot.
    pub fn oldest(&self) -> Option<usize> {
        (self.head != NIL).then_some(self.head as usize)
    }

    fn link_mut(&mut self, slot: u32) -> Option<&mut Link> {
        if slot == NIL {
            return None;
        }
        self.links.get_mut(slot as usize)
    }

    /// Slots from least to most recent (tests).
    #[cfg(test)]
    fn order(&self) -> Vec<usize> {
        let mut v = Vec::new();
        let mut s = self.head;
        while s != NIL {
            v.push(s as usize);
            s = self.links[s as usize].next;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_moves_to_the_end() {
        let mut l = Lru::default();
        assert_eq!(l.oldest(), None);
        for i in 0..4 {
            assert_eq!(l.push(), Some(i));
        }
        assert_eq!(l.order(), [0, 1, 2, 3]);
        l.touch(0);
        assert_eq!(l.order(), [1, 2, 3, 0]);
        l.touch(2);
        assert_eq!(l.order(), [1, 3, 0, 2]);
        l.touch(2);
        l.touch(99);
        assert_eq!(l.order(), [1, 3, 0, 2]);
        assert_eq!(l.oldest(), Some(1));
        l.touch(1);
        assert_eq!(l.order(), [3, 0, 2, 1]);
        // Backwards links agree.
        let mut back = Vec::new();
        let mut s = l.tail;
        while s != NIL {
            back.push(s as usize);
            s = l.links[s as usize].prev;
        }
        back.reverse();
        assert_eq!(back, l.order());
    }

    #[test]
    fn single_slot() {
        let mut l = Lru::default();
        l.push();
        l.touch(0);
        assert_eq!(l.order(), [0]);
        assert_eq!(l.oldest(), Some(0));
    }
}
