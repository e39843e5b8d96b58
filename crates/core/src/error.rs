//! The one error shape shared by configuration, rules, control requests and tuning: the
//! offending field (as the user spelled it: a TOML key, a CLI flag, a control-request field, a
//! file) and the reason. Callers match on `field` to point at the input; nobody parses the
//! `Display` text.

use serde::{Deserialize, Serialize};

/// A rejected input: which field and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{field}: {reason}")]
#[serde(deny_unknown_fields)]
pub struct FieldError {
    /// The offending field, as spelled in the input (`dst_port`, `classes[1].budget`, `--loads`).
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl FieldError {
    /// Builds an error for `field`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same error one level down: `classes[1]` + `budget` → `classes[1].budget`.
    pub fn within(self, parent: &str) -> Self {
        FieldError {
            field: format!("{parent}.{}", self.field),
            reason: self.reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_json_name_the_field() {
        let e = FieldError::new("budget", "must be at least 1").within("classes[1]");
        assert_eq!(e.to_string(), "classes[1].budget: must be at least 1");
        let j = serde_json::to_string(&e).unwrap();
        assert_eq!(
            serde_json::from_str::<FieldError>(&j).unwrap(),
            e,
            "json round trip"
        );
        assert!(serde_json::from_str::<FieldError>(r#"{"field":"a","reason":"b","x":1}"#).is_err());
    }
}
