//! A bounded FIFO with drop counting: the simulated counterpart of an Rx ring.

use std::collections::VecDeque;

/// A bounded FIFO. A push into a full ring is an *early drop* (paper 004): the packet is refused
/// before any CPU is spent on it, and counted.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    q: VecDeque<T>,
    capacity: usize,
    enqueued: u64,
    dropped: u64,
}

impl<T> Ring<T> {
    /// A ring holding at most `capacity` items (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Ring {
            q: VecDeque::with_capacity(capacity),
            capacity,
            enqueued: 0,
            dropped: 0,
        }
    }

    /// Appends `item`, or hands it back and counts a drop when the ring is full.
    #[inline]
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.q.len() >= self.capacity {
            self.dropped += 1;
            return Err(item);
        }
        self.enqueued += 1;
        self.q.push_back(item);
        Ok(())
    }

    /// Removes the oldest item.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        self.q.pop_front()
    }

    /// The oldest item, if any.
    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.q.front()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.q.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Items accepted so far.
    pub fn enqueued(&self) -> u64 {
        self.enqueued
    }

    /// Items refused because the ring was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_only_when_full_and_keeps_order() {
        let mut r = Ring::new(2);
        assert!(r.push(1).is_ok());
        assert!(r.push(2).is_ok());
        assert_eq!(r.push(3), Err(3));
        assert_eq!((r.enqueued(), r.dropped()), (2, 1));
        assert_eq!(r.pop(), Some(1));
        assert!(r.push(4).is_ok());
        assert_eq!(r.pop(), Some(2));
        assert_eq!(r.pop(), Some(4));
        assert_eq!(r.pop(), None);
    }
}
