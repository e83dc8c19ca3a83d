//! An integer's decimal digits, written into a buffer on the stack: the spelling `Display`
//! gives, without going through `fmt::Write` (which cost a writer of plans and transcripts a
//! twentieth of its time, for the many estimates and ids it writes).

/// Room for an integer's decimal digits, written from the right, and lent out as a `&str`.
///
/// ```
/// use cutctx_json::Digits;
/// let mut d = Digits::new();
/// assert_eq!(d.of(1_234), "1234");
/// assert_eq!(d.of_signed(-7), "-7");
/// assert_eq!(d.of(u64::MAX), u64::MAX.to_string());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Digits([u8; 20]);

impl Digits {
    /// An empty buffer.
    #[must_use]
    pub const fn new() -> Self {
        Self([0; 20])
    }

    /// `n` in decimal, as `Display` writes it.
    pub fn of(&mut self, n: u64) -> &str {
        self.write(n, false)
    }

    /// `n` in decimal, a minus sign before a negative one, as `Display` writes it.
    pub fn of_signed(&mut self, n: i64) -> &str {
        self.write(n.unsigned_abs(), n < 0)
    }

    /// The magnitude `n`, after a minus sign when `negative`: up to 20 digits, or 19 and the
    /// sign, fit.
    fn write(&mut self, mut n: u64, negative: bool) -> &str {
        let mut at = self.0.len();
        loop {
            at -= 1;
            // A digit: the cast keeps the remainder, below ten.
            self.0[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if negative {
            at -= 1;
            self.0[at] = b'-';
        }
        std::str::from_utf8(&self.0[at..]).expect("ASCII digits and a sign are UTF-8")
    }
}

impl Default for Digits {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::Digits;

    #[test]
    fn every_boundary_is_spelled_as_display_spells_it() {
        let mut d = Digits::new();
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            12_345,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(d.of(n), n.to_string());
        }
        for n in [0, -1, 1, -9, -10, 10, i64::MIN, i64::MIN + 1, i64::MAX] {
            assert_eq!(d.of_signed(n), n.to_string());
        }
    }

    proptest::proptest! {
        #[test]
        fn any_integer_is_spelled_as_display_spells_it(
            u in proptest::prelude::any::<u64>(),
            i in proptest::prelude::any::<i64>(),
        ) {
            let mut d = Digits::new();
            proptest::prop_assert_eq!(d.of(u), u.to_string());
            proptest::prop_assert_eq!(d.of_signed(i), i.to_string());
        }
    }
}
