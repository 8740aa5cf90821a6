//! What a parser says of text that does not have the format the kernel documents.

/// Text that does not have the format the kernel documents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse {what} from {input:?}: {reason}")]
pub struct ParseError {
    /// What was expected ("cpulist", "PCI address").
    pub what: &'static str,
    /// The offending text, shortened to 80 characters.
    pub input: String,
    pub reason: String,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, input: &str, reason: impl Into<String>) -> Self {
        let mut input: String = input.chars().take(80).collect();
        if input.len() < 80 && input.ends_with('\n') {
            input.pop();
        }
        Self {
            what,
            input,
            reason: reason.into(),
        }
    }
}

/// The public kind: a text that does not parse.
#[doc(hidden)]
impl From<ParseError> for crate::error::Error {
    fn from(e: ParseError) -> Self {
        crate::error::Error::Parse(e.to_string())
    }
}
