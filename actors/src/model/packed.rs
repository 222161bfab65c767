//! Short strings kept in one buffer. Every stored object carries its labels and its
//! selectable field values for as long as it is cached; held as a map or a vector of
//! `String`s they cost an allocation per string (and a map node of half a kilobyte), held
//! here two allocations in all.

use std::fmt;

/// A sequence of strings: their text back to back, and where each one ends.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PackedStrings {
    text: Box<str>,
    ends: Box<[u32]>,
}

impl PackedStrings {
    /// Packs `strings` in order. The iterator is walked twice: once to size the buffers,
    /// once to fill them.
    pub fn new<'a, I>(strings: I) -> Self
    where
        I: Iterator<Item = &'a str> + Clone,
    {
        let (count, bytes) = strings.clone().fold((0, 0), |(n, len), s| (n + 1, len + s.len()));
        let mut text = String::with_capacity(bytes);
        let mut ends = Vec::with_capacity(count);
        for s in strings {
            text.push_str(s);
            ends.push(u32::try_from(text.len()).expect("packed strings stay under 4 GiB"));
        }
        PackedStrings { text: text.into_boxed_str(), ends: ends.into_boxed_slice() }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The `index`th string; None past the end.
    pub fn get(&self, index: usize) -> Option<&str> {
        let end = *self.ends.get(index)? as usize;
        let start = index.checked_sub(1).map_or(0, |previous| self.ends[previous] as usize);
        Some(&self.text[start..end])
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

impl fmt::Debug for PackedStrings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_as_packed() {
        let strings = ["app", "", "web", "ünïcode", ""];
        let packed = PackedStrings::new(strings.iter().copied());
        assert_eq!(packed.len(), 5);
        assert_eq!(packed.iter().collect::<Vec<_>>(), strings);
        assert_eq!(packed.get(3), Some("ünïcode"));
        assert_eq!(packed.get(5), None);
        assert_eq!(format!("{packed:?}"), r#"["app", "", "web", "ünïcode", ""]"#);
    }

    #[test]
    fn empty() {
        let packed = PackedStrings::new(std::iter::empty());
        assert_eq!(packed.len(), 0);
        assert_eq!(packed, PackedStrings::default());
        assert_eq!(packed.get(0), None);
    }
}
