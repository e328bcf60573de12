//! Times on the wire: RFC 3339 UTC strings with milliseconds.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::{Iso8601, Rfc3339};
use time::{OffsetDateTime, UtcOffset};

use crate::RuleError;

/// A point in time, in milliseconds since the Unix epoch, UTC.
///
/// Written on the wire as `2026-11-30T05:00:00.000Z`. The core never reads
/// the clock: times come from the clock the program injects.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// The last time RFC 3339 can write: `9999-12-31T23:59:59.999Z`.
    pub const MAX: Timestamp = Timestamp(253_402_300_799_999);

    /// A time from milliseconds since the Unix epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// This time plus `ms` milliseconds (saturating).
    pub const fn plus_millis(self, ms: u64) -> Self {
        Timestamp(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self`, 0 when `earlier` is later.
    pub const fn millis_since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Parses an ISO 8601 / RFC 3339 time with a zone (`Z` or an offset).
    /// A time without offset is an error: it names no instant.
    ///
    /// Besides RFC 3339 (`2026-11-30T05:00:00.000Z`, `…T06:00:00+01:00`), the
    /// ISO 8601 forms with an offset that JavaScript's `Date` accepts are
    /// read too: a basic offset (`2026-11-30T05:00:00+0100`), no seconds
    /// (`2026-11-30T05:00Z`), any number of fraction digits. The date must
    /// be a calendar date written `YYYY-MM-DD`, then `T`: week and ordinal
    /// dates and the basic date form are refused, as `Date` refuses them.
    /// Sub-millisecond digits are dropped. A time before 1970 is an
    /// out-of-range error.
    ///
    /// ```
    /// use durable_sdk::types::Timestamp;
    /// let t = Timestamp::parse("2026-11-30T06:00:00.123456+0100").unwrap();
    /// assert_eq!(t.to_rfc3339(), "2026-11-30T05:00:00.123Z");
    /// assert!(Timestamp::parse("2026-11-30T05:00:00").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<Self, RuleError> {
        let dt = OffsetDateTime::parse(s, &Rfc3339)
            .ok()
            .or_else(|| {
                if iso_calendar_shape(s) { OffsetDateTime::parse(s, &Iso8601::DEFAULT).ok() } else { None }
            })
            .ok_or_else(|| {
                RuleError::invalid(
                    "time",
                    format!(
                        "time rule: {s:?} is not an ISO 8601 time with a zone (e.g. 2026-11-30T05:00:00.000Z)"
                    ),
                )
            })?;
        let nanos = dt.unix_timestamp_nanos();
        if nanos < 0 {
            return Err(RuleError::out_of_range("time", format!("time rule: {s:?} is before 1970")));
        }
        u64::try_from(nanos / 1_000_000).map(Timestamp).map_err(|_| {
            RuleError::out_of_range("time", format!("time rule: {s:?} is too far in the future"))
        })
    }

    /// The RFC 3339 UTC form with milliseconds.
    pub fn to_rfc3339(self) -> String {
        let bytes = self.rfc3339_bytes();
        // Every byte is an ASCII digit or one of `-T:.Z`.
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The 24 bytes of the RFC 3339 form, `YYYY-MM-DDTHH:MM:SS.mmmZ`. The
    /// calendar is `time`'s; the fixed-width fields are written as digits
    /// here, because every event, item and answer carries a time and
    /// `format!`'s padding machinery was most of what writing one cost.
    fn rfc3339_bytes(self) -> [u8; 24] {
        // Clamped: a later time has no RFC 3339 form (asks refuse one).
        let nanos = i128::from(self.0.min(Self::MAX.0)) * 1_000_000;
        let dt = OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
            .to_offset(UtcOffset::UTC);
        let mut out = *b"0000-00-00T00:00:00.000Z";
        let mut digits = |at: usize, width: usize, mut n: u32| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        // The year is 1970..=9999: the clamp above keeps it to four digits.
        digits(0, 4, dt.year().unsigned_abs());
        digits(5, 2, u32::from(u8::from(dt.month())));
        digits(8, 2, u32::from(dt.day()));
        digits(11, 2, u32::from(dt.hour()));
        digits(14, 2, u32::from(dt.minute()));
        digits(17, 2, u32::from(dt.second()));
        digits(20, 3, u32::from(dt.millisecond()));
        out
    }
}

/// Whether `s` starts like the ISO 8601 date-time forms JavaScript's `Date`
/// reads: a calendar date `YYYY-MM-DD`, then `T`, and no decimal comma.
fn iso_calendar_shape(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 11
        && b[..10]
            .iter()
            .enumerate()
            .all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
        && b[10] == b'T'
        && !s.contains(',')
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.to_rfc3339())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Written from the stack: no allocation per time.
        let bytes = self.rfc3339_bytes();
        s.serialize_str(std::str::from_utf8(&bytes).unwrap_or("1970-01-01T00:00:00.000Z"))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        let t = Timestamp::parse("2026-11-30T05:00:00.000Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-30T05:00:00.000Z");
        assert_eq!(Timestamp::from_millis(1).to_rfc3339(), "1970-01-01T00:00:00.001Z");
        let shifted = Timestamp::parse("2026-11-30T06:00:00.5+01:00").unwrap();
        assert_eq!(shifted.to_rfc3339(), "2026-11-30T05:00:00.500Z");
    }

    #[test]
    fn a_time_without_offset_is_an_error() {
        for s in ["2026-11-30T05:00:00", "2026-11-30T05:00", "2026-11-30T05:00:00.123", "2026-11-30"] {
            let e = Timestamp::parse(s).unwrap_err();
            assert!(e.is_invalid_argument(), "{s:?}");
            assert_eq!(e.rule(), "time");
        }
    }

    #[test]
    fn time_rule_accepts_iso8601_offsets_that_js_date_reads() {
        let five = "2026-11-30T05:00:00.000Z";
        for (s, want) in [
            ("2026-11-30T06:00:00+0100", five),
            ("2026-11-30T05:00Z", five),
            ("2026-11-30T06:00+01:00", five),
            ("2026-11-30T04:00:00-0100", five),
            ("2026-11-30T06:00:00.123456+01:00", "2026-11-30T05:00:00.123Z"),
            ("2026-11-30T06:00:00.1239+0100", "2026-11-30T05:00:00.123Z"),
            ("2026-11-30T05:00:00.5Z", "2026-11-30T05:00:00.500Z"),
        ] {
            let t = Timestamp::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert_eq!(t.to_rfc3339(), want, "{s:?}");
        }
        // ISO 8601 forms JS `Date` does not read stay refused.
        for s in [
            "20261130T050000Z",
            "2026-W48-1T05:00Z",
            "2026-334T05:00Z",
            "2026-11-30T05:00:00,5Z",
            "2026-11-30T25:00Z",
        ] {
            let e = Timestamp::parse(s).unwrap_err();
            assert!(e.is_invalid_argument(), "{s:?}");
        }
    }

    #[test]
    fn time_rule_refuses_times_before_1970_as_out_of_range() {
        for s in ["1969-12-31T23:59:59.000Z", "1969-12-31T23:59:59.9995Z", "1970-01-01T00:30:00+0100"] {
            let e = Timestamp::parse(s).unwrap_err();
            assert!(e.is_out_of_range(), "{s:?}");
            assert_eq!(e.rule(), "time");
        }
        assert_eq!(Timestamp::parse("1970-01-01T00:00:00.000Z").unwrap(), Timestamp::EPOCH);
        assert_eq!(Timestamp::parse("1970-01-01T01:00:00+0100").unwrap(), Timestamp::EPOCH);
    }

    proptest::proptest! {
        /// The digits written by hand agree with `time`'s own formatter,
        /// from the epoch to past the last writable time (clamped).
        #[test]
        fn the_rfc3339_form_is_times_own(ms in 0u64..=Timestamp::MAX.0 + 10_000_000) {
            let format = time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
            );
            let clamped = i128::from(ms.min(Timestamp::MAX.0)) * 1_000_000;
            let want = OffsetDateTime::from_unix_timestamp_nanos(clamped).unwrap().format(&format).unwrap();
            let t = Timestamp::from_millis(ms);
            proptest::prop_assert_eq!(&t.to_rfc3339(), &want);
            proptest::prop_assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{want}\""));
            proptest::prop_assert_eq!(Timestamp::parse(&want).unwrap(), Timestamp::from_millis(ms.min(Timestamp::MAX.0)));
        }
    }
}
