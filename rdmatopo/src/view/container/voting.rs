//! One device's votes: each source for it, against it, or only noting what it saw; and
//! the ownership they decide, with a finding where sources disagree.

use super::context::Context;
use super::ownership::{Evidence, Ownership};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Vote {
    For,
    Against,
    /// Seen, but says nothing about ownership.
    Note,
}

#[derive(Debug, Default)]
pub(super) struct Tally {
    items: Vec<(Vote, Evidence)>,
}

impl Tally {
    pub(super) fn add(&mut self, vote: Vote, source: impl Into<String>, value: impl Into<String>) {
        self.items.push((vote, Evidence::new(source, value)));
    }

    /// Whether any source voted for or against.
    pub(super) fn voted(&self) -> bool {
        self.items.iter().any(|(v, _)| *v != Vote::Note)
    }

    fn sources(&self, vote: Vote) -> Vec<String> {
        let mut v: Vec<String> = self
            .items
            .iter()
            .filter(|(x, _)| *x == vote)
            .map(|(_, e)| e.source.clone())
            .collect();
        v.dedup();
        v
    }

    /// The state, and a finding when the sources disagree.
    pub(super) fn decide(
        self,
        what: &str,
        context: Context,
        findings: &mut Vec<String>,
    ) -> (Ownership, Vec<Evidence>) {
        let has = |v: Vote| self.items.iter().any(|(x, _)| *x == v);
        let (for_, against) = (has(Vote::For), has(Vote::Against));
        let state = match (for_, against) {
            (true, false) => Ownership::Owned,
            (false, true) => Ownership::Visible,
            (true, true) => {
                findings.push(format!(
                    "{what}: sources disagree: {} it is this container's, {} it is not",
                    says(&self.sources(Vote::For)),
                    says(&self.sources(Vote::Against))
                ));
                Ownership::Unknown
            }
            (false, false) if context.is_container() => Ownership::Unknown,
            (false, false) => Ownership::Owned,
        };
        let mut evidence: Vec<Evidence> = self.items.into_iter().map(|(_, e)| e).collect();
        if !for_ && !against {
            evidence.push(if context.is_container() {
                Evidence::new("context", "in a container, and no source says whose it is")
            } else {
                Evidence::new("context", "host: part of this machine")
            });
        }
        (state, evidence)
    }
}

/// "A says", "A and B say", "A, B and C say": one side of a disagreement.
fn says(sources: &[String]) -> String {
    match sources {
        [] => String::new(),
        [one] => format!("{one} says"),
        [rest @ .., last] => format!("{} and {last} say", rest.join(", ")),
    }
}
