//! The model's window: the shipped table (`windows.json`, dated, each entry citing the
//! provider's documentation), the config file's entries over it, `--window` over both.
//!
//! Keys are model-name prefixes and the longest matching key wins, so `gpt-4o-2024-08-06`
//! takes `gpt-4o`'s window and `gpt-4o-mini` its own. A model no key matches gets
//! [`DEFAULT_WINDOW`].

use std::collections::BTreeMap;

use cutctx_ops::OpsError;
use cutctx_ops::details;
use serde::Deserialize;

/// The window of a model no table knows, in tokens.
pub const DEFAULT_WINDOW: u64 = 128_000;

/// The shipped table's text.
const SHIPPED: &str = include_str!("../windows.json");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[expect(
        dead_code,
        reason = "the table's date, read by people and checked by a test"
    )]
    as_of: String,
    #[expect(dead_code, reason = "the table's own description")]
    about: String,
    models: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    model: String,
    window: u64,
    #[expect(
        dead_code,
        reason = "the citation, for people; a test checks every entry has one"
    )]
    source: String,
    #[serde(default)]
    #[expect(dead_code, reason = "a remark for people")]
    note: Option<String>,
}

/// The windows the proxy tests requests against.
#[derive(Debug, Clone)]
pub struct Windows {
    shipped: BTreeMap<String, u64>,
    configured: BTreeMap<String, u64>,
    every_model: Option<u64>,
}

impl Windows {
    /// The shipped table, `configured` (the config file's `windows`) over it and
    /// `every_model` (`--window`) over both.
    ///
    /// # Errors
    ///
    /// `INTERNAL_ERROR` when the shipped table does not read (a defect of the build).
    ///
    /// ```
    /// use cutctx_serve::Windows;
    /// let w = Windows::new(Default::default(), None)?;
    /// assert_eq!(w.window_for(Some("gpt-4o-2024-08-06")), 128_000);
    /// assert_eq!(w.window_for(Some("gpt-4.1-mini")), 1_047_576);
    /// assert_eq!(w.window_for(Some("claude-sonnet-4-5-20250929")), 200_000);
    /// assert_eq!(w.window_for(Some("unknown-model")), cutctx_serve::DEFAULT_WINDOW);
    /// let forced = Windows::new(Default::default(), Some(5000))?;
    /// assert_eq!(forced.window_for(Some("gpt-4o")), 5000);
    /// # Ok::<(), cutctx_ops::OpsError>(())
    /// ```
    pub fn new(
        configured: BTreeMap<String, u64>,
        every_model: Option<u64>,
    ) -> Result<Self, OpsError> {
        let table: Table = serde_json::from_str(SHIPPED).map_err(|e| {
            OpsError::internal(
                format!("the shipped window table does not read: {e}"),
                details! { "document" => "windows.json" },
            )
        })?;
        let shipped = table
            .models
            .into_iter()
            .map(|e| (e.model, e.window))
            .collect();
        Ok(Self {
            shipped,
            configured,
            every_model,
        })
    }

    /// The window of `model` (`None`: the request names none).
    #[must_use]
    pub fn window_for(&self, model: Option<&str>) -> u64 {
        if let Some(n) = self.every_model {
            return n;
        }
        let Some(model) = model else {
            return DEFAULT_WINDOW;
        };
        longest_prefix(&self.configured, model)
            .or_else(|| longest_prefix(&self.shipped, model))
            .unwrap_or(DEFAULT_WINDOW)
    }
}

/// The value of the longest key of `table` that `model` starts with.
fn longest_prefix(table: &BTreeMap<String, u64>, model: &str) -> Option<u64> {
    table
        .iter()
        .filter(|(k, _)| model.starts_with(k.as_str()))
        .max_by_key(|(k, _)| k.len())
        .map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_entry_is_dated_and_cites_its_source() {
        let table: serde_json::Value = serde_json::from_str(SHIPPED).expect("json");
        assert_eq!(table["as_of"], "2026-12");
        for e in table["models"].as_array().expect("models") {
            let source = e["source"].as_str().expect("source");
            assert!(source.starts_with("https://"), "{e}");
            assert!(e["window"].as_u64().expect("window") >= 100_000, "{e}");
        }
    }

    #[test]
    fn the_config_wins_over_the_table_and_the_longest_key_wins() {
        let mut configured = BTreeMap::new();
        configured.insert("gpt-4o".to_owned(), 9000);
        let w = Windows::new(configured, None).expect("table");
        assert_eq!(w.window_for(Some("gpt-4o-mini")), 9000);
        assert_eq!(w.window_for(Some("gpt-5-chat-latest")), 128_000);
        assert_eq!(w.window_for(Some("gpt-5-mini")), 400_000);
        assert_eq!(w.window_for(None), DEFAULT_WINDOW);
    }
}
