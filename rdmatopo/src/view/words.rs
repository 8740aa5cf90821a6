//! How the view's answers name several devices in one line.

/// How many names [`list_short`] prints in full: a longer list is cut to three.
pub(crate) const SHORT_LIST: usize = 4;

/// `a, b, c` or `a, b, … (n in all)`: a list of device names in one line.
pub(crate) fn list_short(names: &[&str]) -> String {
    list_short_counted(names, 0)
}

/// As [`list_short`], of `names` and `unnamed` more after them, counted but not named
/// (an owned view keeps the first names of other containers' devices only as far as a
/// short list shows them: [`crate::discover::OtherNames::First`]).
pub(crate) fn list_short_counted(names: &[&str], unnamed: usize) -> String {
    let mut v: Vec<&str> = names.to_vec();
    v.dedup();
    let all = v.len() + unnamed;
    if all <= SHORT_LIST {
        v.join(", ")
    } else {
        let first: Vec<&str> = v.iter().take(SHORT_LIST - 1).copied().collect();
        format!("{}, … ({all} in all)", first.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nccl-env` keeps as many names of other containers' devices as its note shows.
    #[test]
    fn nccl_env_keeps_the_names_its_note_shows() {
        assert_eq!(
            crate::Needs::NCCL_ENV.others,
            crate::OtherNames::First(SHORT_LIST)
        );
    }

    #[test]
    fn a_counted_list_reads_as_the_whole_list() {
        let names = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"];
        for kept in SHORT_LIST..=names.len() {
            assert_eq!(
                list_short_counted(&names[..kept], names.len() - kept),
                list_short(&names),
            );
        }
        assert_eq!(list_short_counted(&names[..2], 0), "mlx5_0, mlx5_1");
    }
}
