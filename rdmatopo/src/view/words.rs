//! How the view's answers name several devices in one line.

/// `a, b, c` or `a, b, … (n in all)`: a list of device names in one line.
pub(crate) fn list_short(names: &[&str]) -> String {
    let mut v: Vec<&str> = names.to_vec();
    v.dedup();
    if v.len() <= 4 {
        v.join(", ")
    } else {
        format!("{}, … ({} in all)", v[..3].join(", "), v.len())
    }
}
