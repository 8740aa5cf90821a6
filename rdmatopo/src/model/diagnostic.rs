use serde::{Deserialize, Serialize};

/// How much a diagnostic matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Informational: a fact missing that nothing needs.
    Info,
    /// A fact missing that some answer needs; the answer says what it assumed.
    Warning,
    /// A fact missing that leaves an answer wrong or absent.
    Error,
}

/// Something discovery could not read or make sense of. Never fatal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Diagnostic {
    /// How much it matters.
    pub severity: Severity,
    /// Stable kebab-case code (`unreadable-attribute`, `unparsable-attribute`, …).
    pub code: String,
    /// The logical path concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What went wrong, for a person.
    pub message: String,
}

impl Diagnostic {
    #[doc(hidden)]
    pub fn new(
        severity: Severity,
        code: &str,
        path: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity,
            code: code.to_string(),
            path: path.map(str::to_string),
            message: message.into(),
        }
    }
}
