//! Times on the wire: RFC 3339 UTC strings with milliseconds.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
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
    pub fn parse(s: &str) -> Result<Self, RuleError> {
        let dt = OffsetDateTime::parse(s, &Rfc3339).map_err(|_| {
            RuleError::invalid(
                "time",
                format!("time rule: {s:?} is not an ISO 8601 time with a zone (e.g. 2026-11-30T05:00:00.000Z)"),
            )
        })?;
        let ms = dt.unix_timestamp_nanos() / 1_000_000;
        u64::try_from(ms)
            .map(Timestamp)
            .map_err(|_| RuleError::out_of_range("time", format!("time rule: {s:?} is before 1970")))
    }

    /// The RFC 3339 UTC form with milliseconds.
    pub fn to_rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        let dt = OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
            .to_offset(UtcOffset::UTC);
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            dt.millisecond()
        )
    }
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
        s.serialize_str(&self.to_rfc3339())
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
        let e = Timestamp::parse("2026-11-30T05:00:00").unwrap_err();
        assert!(e.is_invalid_argument());
        assert_eq!(e.rule(), "time");
    }
}
