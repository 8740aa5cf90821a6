use serde::{Deserialize, Serialize};

/// How much a diagnostic matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// Something discovery could not read or make sense of. Never fatal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable kebab-case code (`unreadable-attribute`, `unparsable-attribute`, …).
    pub code: String,
    /// The logical path concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub message: String,
}

impl Diagnostic {
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
