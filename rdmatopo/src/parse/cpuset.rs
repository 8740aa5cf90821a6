use super::error::ParseError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Highest CPU number accepted (the kernel's `NR_CPUS` limit is 8192).
const MAX_CPU: u32 = 1 << 16;

/// A set of CPU numbers, kept as sorted disjoint inclusive ranges. Its text form is
/// the kernel's cpulist (`0-31,64-95`), also in JSON.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    ranges: Vec<(u32, u32)>,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Build from any CPU numbers.
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Self {
        let mut v: Vec<u32> = cpus.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        let mut s = Self::new();
        for c in v {
            s.push(c, c);
        }
        s
    }

    fn push(&mut self, lo: u32, hi: u32) {
        if let Some(last) = self.ranges.last_mut()
            && lo <= last.1.saturating_add(1)
        {
            last.1 = last.1.max(hi);
            return;
        }
        self.ranges.push((lo, hi));
    }

    fn from_ranges(mut ranges: Vec<(u32, u32)>) -> Self {
        ranges.sort_unstable();
        let mut s = Self::new();
        for (lo, hi) in ranges {
            s.push(lo, hi);
        }
        s
    }

    /// No CPU.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.ranges.iter().map(|(a, b)| (b - a + 1) as usize).sum()
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= cpu && cpu <= b)
    }

    /// The CPUs, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| a..=b)
    }

    /// Every CPU of either set.
    pub fn union(&self, other: &Self) -> Self {
        Self::from_ranges(self.ranges.iter().chain(&other.ranges).copied().collect())
    }

    /// The CPUs of both sets.
    pub fn intersection(&self, other: &Self) -> Self {
        let mut out = Self::new();
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = self.ranges[i];
            let (c, d) = other.ranges[j];
            let lo = a.max(c);
            let hi = b.min(d);
            if lo <= hi {
                out.push(lo, hi);
            }
            if b < d { i += 1 } else { j += 1 }
        }
        out
    }

    /// The CPUs of this set not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        Self::from_cpus(self.iter().filter(|c| !other.contains(*c)))
    }

    /// Whether every CPU of this set is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.intersection(other) == *self
    }

    /// Split into `parts` contiguous, non-overlapping, nearly equal pieces (in CPU order).
    pub fn split(&self, parts: usize) -> Vec<CpuSet> {
        let cpus: Vec<u32> = self.iter().collect();
        let parts = parts.max(1);
        (0..parts)
            .map(|k| {
                let lo = k * cpus.len() / parts;
                let hi = (k + 1) * cpus.len() / parts;
                Self::from_cpus(cpus[lo..hi].iter().copied())
            })
            .collect()
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?
            } else {
                write!(f, "{a}-{b}")?
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_cpulist(&s).map_err(serde::de::Error::custom)
    }
}

/// Parse a kernel cpulist (`0-3,8-11`; empty for none).
impl std::str::FromStr for CpuSet {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> Result<Self, crate::error::Error> {
        Ok(parse_cpulist(s)?)
    }
}

/// Parse a cpulist (`0-3,8-11`, empty for none; also the `a-b:used/group` stride form
/// that `bitmap_parselist` accepts).
pub fn parse_cpulist(text: &str) -> Result<CpuSet, ParseError> {
    let err = |r: &str| ParseError::new("cpulist", text, r);
    let num = |s: &str| -> Result<u32, ParseError> {
        let n: u32 = s.trim().parse().map_err(|_| err("not a number"))?;
        if n >= MAX_CPU {
            Err(err("CPU number out of range"))
        } else {
            Ok(n)
        }
    };
    let mut ranges = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let (span, stride) = match part.split_once(':') {
            Some((span, stride)) => (span, Some(stride)),
            None => (part, None),
        };
        let (lo, hi) = match span.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(span)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(err("range start after its end"));
        }
        match stride {
            None => ranges.push((lo, hi)),
            Some(s) => {
                let (used, group) = s.split_once('/').ok_or_else(|| err("bad stride"))?;
                let (used, group) = (num(used)?, num(group)?);
                if used == 0 || group == 0 || used > group {
                    return Err(err("bad stride"));
                }
                let mut start = lo;
                while start <= hi {
                    ranges.push((start, (start + used - 1).min(hi)));
                    start = start.saturating_add(group);
                }
            }
        }
    }
    Ok(CpuSet::from_ranges(ranges))
}

/// Parse a cpumask: 32-bit hex words separated by commas, most significant first
/// (`ff,ffffffff`).
pub fn parse_cpumask(text: &str) -> Result<CpuSet, ParseError> {
    let t = text.trim();
    let words: Vec<&str> = t.split(',').collect();
    if t.is_empty() || words.len() > (MAX_CPU / 32) as usize {
        return Err(ParseError::new("cpumask", text, "empty or too long"));
    }
    let mut cpus = Vec::new();
    for (i, w) in words.iter().rev().enumerate() {
        if w.is_empty() || w.len() > 8 {
            return Err(ParseError::new(
                "cpumask",
                text,
                "each word must be 1 to 8 hex digits",
            ));
        }
        let v = u32::from_str_radix(w, 16)
            .map_err(|_| ParseError::new("cpumask", text, "not hexadecimal"))?;
        for bit in 0..32 {
            if v & (1 << bit) != 0 {
                cpus.push(i as u32 * 32 + bit);
            }
        }
    }
    Ok(CpuSet::from_cpus(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulist_forms() {
        assert_eq!(parse_cpulist("0-3,8-11\n").unwrap().to_string(), "0-3,8-11");
        assert_eq!(parse_cpulist("\n").unwrap().len(), 0);
        assert_eq!(parse_cpulist("5").unwrap().to_string(), "5");
        assert_eq!(parse_cpulist("0-7:2/4").unwrap().to_string(), "0-1,4-5");
        assert_eq!(parse_cpulist("3,1,2").unwrap().to_string(), "1-3");
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
        assert!(parse_cpulist("0-99999999").is_err());
    }

    #[test]
    fn cpumask_forms() {
        // 40 CPUs, from the kernel's %*pb example.
        assert_eq!(parse_cpumask("ff,ffffffff\n").unwrap().to_string(), "0-39");
        assert_eq!(
            parse_cpumask("00000000,0000ff00").unwrap().to_string(),
            "8-15"
        );
        assert!(parse_cpumask("").is_err());
        assert!(parse_cpumask("xyz").is_err());
    }

    #[test]
    fn set_algebra() {
        let a = parse_cpulist("0-15").unwrap();
        let b = parse_cpulist("8-23").unwrap();
        assert_eq!(a.intersection(&b).to_string(), "8-15");
        assert_eq!(a.union(&b).to_string(), "0-23");
        assert_eq!(a.difference(&b).to_string(), "0-7");
        let parts = parse_cpulist("0-9").unwrap().split(3);
        assert_eq!(
            parts.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            ["0-2", "3-5", "6-9"]
        );
    }
}
