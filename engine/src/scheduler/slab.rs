//! A generational slab: dense storage indexed by small ids whose slots are
//! reused, with a generation so that a stale id (of a forgotten task) is
//! detected instead of aliasing a newer entry.

/// Index plus generation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct SlabId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

#[derive(Debug)]
enum Slot<T> {
    Full { generation: u32, value: T },
    Empty { generation: u32, next_free: u32 },
}

#[derive(Debug)]
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free_head: u32,
    len: usize,
}

const NONE: u32 = u32::MAX;

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { slots: Vec::new(), free_head: NONE, len: 0 }
    }
}

impl<T> Slab<T> {
    pub fn insert(&mut self, value: T) -> SlabId {
        self.len += 1;
        if self.free_head != NONE {
            let index = self.free_head;
            let slot = &mut self.slots[index as usize];
            let (generation, next) = match slot {
                Slot::Empty { generation, next_free } => (generation.wrapping_add(1), *next_free),
                Slot::Full { .. } => unreachable!("free list points at a full slot"),
            };
            self.free_head = next;
            *slot = Slot::Full { generation, value };
            SlabId { index, generation }
        } else {
            let index = self.slots.len() as u32;
            self.slots.push(Slot::Full { generation: 0, value });
            SlabId { index, generation: 0 }
        }
    }

    pub fn remove(&mut self, id: SlabId) -> Option<T> {
        let slot = self.slots.get_mut(id.index as usize)?;
        match slot {
            Slot::Full { generation, .. } if *generation == id.generation => {
                let old = std::mem::replace(
                    slot,
                    Slot::Empty { generation: id.generation, next_free: self.free_head },
                );
                self.free_head = id.index;
                self.len -= 1;
                match old {
                    Slot::Full { value, .. } => Some(value),
                    Slot::Empty { .. } => None,
                }
            }
            _ => None,
        }
    }

    #[inline]
    pub fn get(&self, id: SlabId) -> Option<&T> {
        match self.slots.get(id.index as usize)? {
            Slot::Full { generation, value } if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    #[inline]
    pub fn get_mut(&mut self, id: SlabId) -> Option<&mut T> {
        match self.slots.get_mut(id.index as usize)? {
            Slot::Full { generation, value } if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (SlabId, &mut T)> {
        self.slots.iter_mut().enumerate().filter_map(|(i, s)| match s {
            Slot::Full { generation, value } => {
                Some((SlabId { index: i as u32, generation: *generation }, value))
            }
            Slot::Empty { .. } => None,
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = (SlabId, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| match s {
            Slot::Full { generation, value } => {
                Some((SlabId { index: i as u32, generation: *generation }, value))
            }
            Slot::Empty { .. } => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_do_not_alias_reused_slots() {
        let mut s = Slab::default();
        let a = s.insert("a");
        assert_eq!(s.remove(a), Some("a"));
        let b = s.insert("b");
        assert_eq!(a.index, b.index);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.len(), 1);
    }
}
