//! The orders of device names: natural (`mlx5_2` before `mlx5_10`, nvidia-smi's NIC
//! legend) and `ls`'s (what `show_gids` and `ibdev2netdev` walk).

/// Order names naturally and without regard to case: `mlx5_2` before `mlx5_10`,
/// `rocep1s0f0` before `roceP2p1s0f0`; names that differ only in case fall back to
/// byte order, so the order stays total.
///
/// This is the order of RDMA devices everywhere, and so of `topo`'s NIC legend. Public
/// `nvidia-smi topo -m` legends it reproduces: DGX Spark (GB10) `rocep1s0f0, rocep1s0f1,
/// roceP2p1s0f0, roceP2p1s0f1` (PCI domain 0000 before 0002; a byte-wise comparison puts
/// the capital `P` first); DGX H100 `mlx5_0` … `mlx5_9, mlx5_10, mlx5_11`; a VF-LAG host
/// `mlx5_0` … `mlx5_31` (VFs) then `mlx5_bond_0` … `mlx5_bond_3`, although each bond's
/// PF precedes its VFs in PCI order, so nvidia-smi does not number by PCI address. One
/// public legend it does not reproduce: a host with udev-renamed devices listing
/// `mlx5_ib0` … `mlx5_ib7` before `mlx5_eth0` … `mlx5_eth4`, which no name order gives
/// (registration order would, but sysfs does not record it).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    natural_cmp_case_blind(a, b).then_with(|| a.cmp(b))
}

/// The order `ls` lists names in, in a UTF-8 locale such as en_US.UTF-8: characters
/// compared one by one without regard to case (digits as characters, so `mlx5_1`,
/// `mlx5_10`, `mlx5_2`), lowercase first between names that differ only in case.
/// `show_gids` and `ibdev2netdev` walk `$(ls /sys/class/infiniband/)` (and `show_gids`
/// each port's `$(ls .../gids/)`), so `gids` and `netdevs` print devices, ports and GID
/// indices in it. Public `ibdev2netdev` outputs it reproduces: an H100 node's `mlx5_0,
/// mlx5_1, mlx5_10, mlx5_11, mlx5_2, …` (imbue-ai/cluster-health#4) and a DGX Spark's
/// `rocep1s0f0, rocep1s0f1, roceP2p1s0f0, roceP2p1s0f1`
/// (<https://m.elecfans.com/article/7412636.html>). Under `LC_COLLATE=C` `ls` puts
/// capitals first (`roceP2p1s0f0` before `rocep1s0f0`); names of one case order the same.
pub fn ls_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (fa, fb) = (a.bytes(), b.bytes());
    fa.map(|c| c.to_ascii_lowercase())
        .cmp(fb.map(|c| c.to_ascii_lowercase()))
        .then_with(|| b.cmp(a))
}

/// A key whose byte order is [`natural_cmp`]'s: text lowercased, each digit run as
/// `0`, its length and its digits without leading zeros, then a NUL and the name itself
/// for the tie. (Kernel device names are far shorter than the 255 digits the length
/// byte can tell apart.) The definition [`natural_head`] takes its first bytes of.
#[cfg(test)]
fn natural_key(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 * name.len() + 3);
    natural_key_bytes(name, |byte| {
        key.push(byte);
        true
    });
    key
}

/// The bytes of `natural_key` (the key's definition, kept for the tests) handed to
/// `push` one by one, while it returns `true`.
fn natural_key_bytes(name: &str, mut push: impl FnMut(u8) -> bool) {
    let b = name.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let run = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let digits = trim_zeros(&b[i..i + run]);
            // `0` sorts against any other character as the run's first digit does.
            let length = u8::try_from(digits.len()).unwrap_or(u8::MAX);
            if !push(b'0') || !push(length) || !digits.iter().all(|d| push(*d)) {
                return;
            }
            i += run;
        } else {
            if !push(b[i].to_ascii_lowercase()) {
                return;
            }
            i += 1;
        }
    }
    if push(0) {
        b.iter().all(|c| push(*c));
    }
}

/// The first 16 bytes of `natural_key` as one number (zeros after a shorter key):
/// two names whose heads differ are in the order of their heads.
fn natural_head(name: &str) -> u128 {
    let (mut head, mut taken) = ([0u8; 16], 0);
    natural_key_bytes(name, |byte| {
        head[taken] = byte;
        taken += 1;
        taken < head.len()
    });
    u128::from_be_bytes(head)
}

/// Sort `items` in [`natural_cmp`] order of their names: a number compared per step,
/// the names only where their first 16 key bytes agree. A host's listing of hundreds
/// of other pods' devices sorts at a fraction of a comparison of names per step.
pub fn sort_natural_by<T>(items: &mut Vec<T>, name: impl Fn(&T) -> &str) {
    let mut keyed: Vec<(u128, T)> = items
        .drain(..)
        .map(|t| (natural_head(name(&t)), t))
        .collect();
    keyed.sort_unstable_by(|(ha, a), (hb, b)| {
        ha.cmp(hb).then_with(|| natural_cmp(name(a), name(b)))
    });
    items.extend(keyed.into_iter().map(|(_, t)| t));
}

/// Two lists of names, each in [`natural_cmp`] order, as one in that order (an owned
/// view's devices held with those only named).
pub fn merge_natural<'n>(
    first: impl IntoIterator<Item = &'n str>,
    second: &'n [String],
) -> Vec<&'n str> {
    let mut out = Vec::with_capacity(second.len());
    let mut second = second.iter().map(String::as_str).peekable();
    for name in first {
        while let Some(n) = second.next_if(|n| natural_cmp(n, name).is_lt()) {
            out.push(n);
        }
        out.push(name);
    }
    out.extend(second);
    out
}

fn natural_cmp_case_blind(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    // The common prefix decides nothing (names share most of theirs: `mlx5_`), except
    // a digit run it ends inside, which compares as a number from its start.
    let mut same = a.iter().zip(b).take_while(|(c, d)| c == d).count();
    while same > 0 && a[same - 1].is_ascii_digit() {
        same -= 1;
    }
    let (mut x, mut y) = (&a[same..], &b[same..]);
    loop {
        match (x.first(), y.first()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, _) => return std::cmp::Ordering::Less,
            (_, None) => return std::cmp::Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let nx = x.iter().take_while(|b| b.is_ascii_digit()).count();
                let ny = y.iter().take_while(|b| b.is_ascii_digit()).count();
                let (dx, dy) = (trim_zeros(&x[..nx]), trim_zeros(&y[..ny]));
                let ord = dx.len().cmp(&dy.len()).then_with(|| dx.cmp(dy));
                if ord != std::cmp::Ordering::Equal {
                    return ord;
                }
                x = &x[nx..];
                y = &y[ny..];
            }
            (Some(c), Some(d)) => {
                let (c, d) = (c.to_ascii_lowercase(), d.to_ascii_lowercase());
                if c != d {
                    return c.cmp(&d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let n = d.iter().take_while(|b| **b == b'0').count();
    &d[n.min(d.len().saturating_sub(1))..]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two public `ibdev2netdev` orders `ls_cmp` follows.
    #[test]
    fn ls_order_of_public_ibdev2netdev_outputs() {
        fn sorted<'a>(names: &[&'a str]) -> Vec<&'a str> {
            let mut v = names.to_vec();
            v.sort_by(|a, b| ls_cmp(a, b));
            v
        }
        assert_eq!(
            sorted(&["mlx5_2", "mlx5_11", "mlx5_0", "mlx5_10", "mlx5_1"]),
            ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11", "mlx5_2"]
        );
        assert_eq!(
            sorted(&["roceP2p1s0f1", "roceP2p1s0f0", "rocep1s0f1", "rocep1s0f0"]),
            ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"]
        );
        assert_eq!(sorted(&["A", "a"]), ["a", "A"]);
    }

    proptest::proptest! {
        #[test]
        fn natural_key_orders_as_natural_cmp(
            a in "[a-zA-Z0-9_.-]{0,12}",
            b in "[a-zA-Z0-9_.-]{0,12}",
        ) {
            proptest::prop_assert_eq!(natural_key(&a).cmp(&natural_key(&b)), natural_cmp(&a, &b));
        }

        /// The head is the key's first 16 bytes, zeros after a shorter key.
        #[test]
        fn natural_head_is_the_keys_first_bytes(name in "(mlx5_|roceP|0)?[a-zA-Z0-9_]{0,24}") {
            let mut first = [0u8; 16];
            for (slot, byte) in first.iter_mut().zip(natural_key(&name)) {
                *slot = byte;
            }
            proptest::prop_assert_eq!(natural_head(&name), u128::from_be_bytes(first));
        }

        /// Heads decide only where they differ, and then as the names do; names
        /// long enough for the head to end inside them are the point.
        #[test]
        fn natural_heads_order_as_natural_cmp(
            a in "(mlx5_|rocep|0)[a-zA-Z0-9_]{0,20}",
            b in "(mlx5_|rocep|0)[a-zA-Z0-9_]{0,20}",
        ) {
            let (ha, hb) = (natural_head(&a), natural_head(&b));
            if ha != hb {
                proptest::prop_assert_eq!(ha.cmp(&hb), natural_cmp(&a, &b));
            }
        }

        #[test]
        fn sort_natural_by_sorts_as_natural_cmp(
            names in proptest::collection::vec("(mlx5_|mlx5_bond_|roceP)?[a-zA-Z0-9]{0,18}", 0..40),
        ) {
            let mut fast = names.clone();
            sort_natural_by(&mut fast, String::as_str);
            let mut slow = names;
            slow.sort_by(|a, b| natural_cmp(a, b));
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["mlx5_10", "mlx5_2", "mlx5_bond_0", "mlx5_1"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["mlx5_1", "mlx5_2", "mlx5_10", "mlx5_bond_0"]);
    }

    /// nvidia-smi's NIC legends (see `natural_cmp`): case plays no part.
    #[test]
    fn natural_order_is_nvidia_smis_nic_legend_order() {
        let sorted = |names: &[&'static str]| {
            let mut v = names.to_vec();
            v.reverse();
            v.sort_by(|a, b| natural_cmp(a, b));
            v
        };
        // DGX Spark (GB10): PCI domain 0000 named `rocep…`, domain 0002 `roceP2…`.
        let spark = ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"];
        assert_eq!(sorted(&spark), spark);
        let vf_lag = [
            "mlx5_0",
            "mlx5_9",
            "mlx5_10",
            "mlx5_31",
            "mlx5_bond_0",
            "mlx5_bond_3",
        ];
        assert_eq!(sorted(&vf_lag), vf_lag);
        // Names equal but for case keep one order.
        assert_eq!(sorted(&["mlx5_A", "mlx5_a"]), ["mlx5_A", "mlx5_a"]);
        assert_eq!(natural_cmp("roceP2", "roceP2"), std::cmp::Ordering::Equal);
    }
}
