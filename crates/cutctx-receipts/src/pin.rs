//! Head pins: the ledger's tip, published outside the writer's control, to close the
//! truncation gap the chain alone leaves open.
//!
//! A pin is one line, `arcaeon-ledger head chain=<chain> rows=<rows> as_of=<timestamp>`, as
//! arcaeon's `Head.as_pin()` prints it. It is checked the way arcaeon's
//! `verify_against_witness` checks a witnessed pin: a pin over zero rows constrains nothing; a
//! ledger with fewer rows than the pin, or no chain at the pinned row, was truncated; a
//! different chain at the pinned row means history was rewritten at or before it; otherwise
//! the ledger is consistent with the pin (and may have grown since).

use std::fmt;

use crate::chain;
use crate::error::ReceiptError;
use crate::json::Value;
use crate::pyrepr::str_value;

/// The pin line's fixed prefix.
pub const PIN_PREFIX: &str = "arcaeon-ledger head";

/// A ledger's tip, with the verdict of the file it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The last row's chain (`genesis` for an empty ledger), as Python's `str()` of it.
    pub chain: String,
    /// The number of rows (lines that parse as objects).
    pub rows: usize,
    /// When the head was read.
    pub as_of: String,
    /// The file's verdict: `Some(false)` when a break was found.
    pub ok: Option<bool>,
    /// The first break, when there is one.
    pub first_break: Option<String>,
}

impl Head {
    /// The pin line, without a newline.
    ///
    /// # Errors
    ///
    /// [`ReceiptError::Unverified`] when the ledger does not verify: a pin is a published
    /// claim, and over a broken chain it would be false. A bounded verdict (prechain rows,
    /// declared breaks) still pins, as in arcaeon.
    pub fn as_pin(&self) -> Result<String, ReceiptError> {
        if self.ok == Some(false) {
            return Err(ReceiptError::Unverified {
                first_break: self
                    .first_break
                    .clone()
                    .unwrap_or_else(|| "chain broken".to_owned()),
            });
        }
        Ok(Pin {
            chain: self.chain.clone(),
            rows: self.rows,
            as_of: self.as_of.clone(),
        }
        .to_string())
    }
}

/// A parsed pin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The chain at row `rows`.
    pub chain: String,
    /// The number of rows when the pin was taken.
    pub rows: usize,
    /// When it was taken.
    pub as_of: String,
}

impl fmt::Display for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PIN_PREFIX} chain={} rows={} as_of={}",
            self.chain, self.rows, self.as_of
        )
    }
}

impl Pin {
    /// Parses a pin line (surrounding whitespace ignored).
    ///
    /// # Errors
    ///
    /// [`ReceiptError::Malformed`] for anything but one pin line.
    pub fn parse(text: &str) -> Result<Self, ReceiptError> {
        let bad = |why: &str| ReceiptError::Malformed {
            message: format!(
                "not a pin ({why}); expected `{PIN_PREFIX} chain=<chain> rows=<n> as_of=<time>`"
            ),
        };
        let line = text.trim();
        let rest = line
            .strip_prefix(PIN_PREFIX)
            .and_then(|r| r.strip_prefix(' '))
            .ok_or_else(|| bad("wrong prefix"))?;
        let fields: Vec<&str> = rest.split(' ').collect();
        let [chain, rows, as_of] = fields.as_slice() else {
            return Err(bad("expected three fields"));
        };
        let chain = chain
            .strip_prefix("chain=")
            .filter(|c| !c.is_empty())
            .ok_or_else(|| bad("no chain"))?;
        let rows = rows
            .strip_prefix("rows=")
            .filter(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|r| r.parse::<usize>().ok())
            .ok_or_else(|| bad("rows is not a count"))?;
        let as_of = as_of
            .strip_prefix("as_of=")
            .filter(|a| !a.is_empty())
            .ok_or_else(|| bad("no as_of"))?;
        Ok(Self {
            chain: chain.to_owned(),
            rows,
            as_of: as_of.to_owned(),
        })
    }
}

/// How a ledger stands against a pin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinStatus {
    /// The ledger holds the pinned row with the pinned chain.
    Consistent,
    /// The ledger has fewer rows than the pin, or no chain at the pinned row.
    Truncated,
    /// The chain at the pinned row differs.
    Rewritten,
    /// The pin was taken over an empty ledger and constrains nothing.
    Empty,
}

impl PinStatus {
    /// `consistent`, `truncated`, `rewritten` or `no_record` (arcaeon's word for an empty pin).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Consistent => "consistent",
            Self::Truncated => "truncated",
            Self::Rewritten => "rewritten",
            Self::Empty => "no_record",
        }
    }

    /// The stable failure code, `None` when consistent.
    #[must_use]
    pub const fn code(self) -> Option<&'static str> {
        match self {
            Self::Consistent => None,
            Self::Truncated => Some("LEDGER_PIN_TRUNCATED"),
            Self::Rewritten => Some("LEDGER_PIN_REWRITTEN"),
            Self::Empty => Some("LEDGER_PIN_EMPTY"),
        }
    }
}

/// The verdict of a pin check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinVerdict {
    /// The status.
    pub status: PinStatus,
    /// arcaeon's explanation.
    pub detail: String,
    /// The pin checked.
    pub pin: Pin,
    /// The ledger's rows now.
    pub local_rows: usize,
}

impl PinVerdict {
    /// The verdict as JSON.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "status": self.status.as_str(),
            "detail": self.detail,
            "pin": self.pin.to_string(),
            "pin_rows": self.pin.rows,
            "pin_chain": self.pin.chain,
            "local_rows": self.local_rows,
        })
    }
}

/// Checks decoded ledger text, holding `rows` rows, against `pin`.
#[must_use]
pub fn check_pin(text: &str, rows: usize, pin: &Pin) -> PinVerdict {
    let w = pin.rows;
    let (status, detail) = if w == 0 {
        (
            PinStatus::Empty,
            "the pin was taken over an EMPTY log (0 rows): it constrains nothing and cannot \
             confirm this or any other log. Re-pin against a non-empty head."
                .to_owned(),
        )
    } else if rows < w {
        (
            PinStatus::Truncated,
            format!(
                "log has {rows} rows but the pin recorded {w}: {} pinned row(s) are missing \
                 (truncation)",
                w - rows
            ),
        )
    } else {
        match chain::chain_at(text, w) {
            None => (
                PinStatus::Truncated,
                format!("cannot reach row {w} in the log to compare against the pin"),
            ),
            Some(Value::Str(t)) if t == pin.chain.as_str() => {
                let mut detail = "log matches the pin at the pinned row".to_owned();
                if rows > w {
                    detail.push_str(&format!(
                        " and has grown {} row(s) since (expected)",
                        rows - w
                    ));
                }
                (PinStatus::Consistent, detail)
            }
            Some(other) => (
                PinStatus::Rewritten,
                format!(
                    "log's chain at the pinned row {w} differs from the pin ({} != {}): \
                     history was rewritten from at or before that point",
                    str_value(&other),
                    pin.chain
                ),
            ),
        }
    };
    PinVerdict {
        status,
        detail,
        pin: pin.clone(),
        local_rows: rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_parse_and_print() {
        let text = "arcaeon-ledger head chain=f1169c094c7a99b2afbb9a283da4535b rows=3 \
                    as_of=2026-11-29T12:13:00Z\n";
        let pin = Pin::parse(text).expect("a pin");
        assert_eq!(pin.rows, 3);
        assert_eq!(pin.to_string(), text.trim_end());
        for bad in [
            "",
            "arcaeon-ledger head chain=x rows=3",
            "arcaeon-ledger head chain= rows=3 as_of=t",
            "arcaeon-ledger head chain=x rows=-1 as_of=t",
            "arcaeon-ledger head chain=x rows=3 as_of=t extra",
            "arcaeon-ledger  head chain=x rows=3 as_of=t",
        ] {
            assert!(Pin::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn broken_heads_refuse_to_pin() {
        let head = Head {
            chain: "genesis".into(),
            rows: 0,
            as_of: "t".into(),
            ok: Some(false),
            first_break: Some("line 1: unparseable".into()),
        };
        assert!(matches!(
            head.as_pin(),
            Err(ReceiptError::Unverified { .. })
        ));
    }
}
