//! What a server hands the core from the system: the clock, the epoch and the
//! default warn sink (the core reads and writes none of them itself).

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use durable_runtime::Clock;
use durable_types::Timestamp;

/// The system's wall clock, for [`CoreOptions`](durable_runtime::CoreOptions).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Timestamp::from_millis(ms)
    }
}

/// A fresh epoch: 16 random lowercase hex characters (contract §3), chosen
/// once at each start of the agent process.
///
/// Reads the operating system's random source; should that ever fail, the
/// epoch is derived from the time and the process id instead, which is still
/// different at each start (all an epoch has to be).
pub fn random_epoch() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        bytes = fallback_seed().to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn fallback_seed() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    // splitmix64 over the time and the pid.
    let mut z = nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The default warn sink: each warn line becomes exactly one line on standard
/// error (control characters inside it are replaced by spaces).
pub fn stderr_warn() -> impl Fn(&str) + Send + Sync + Clone + 'static {
    |line: &str| {
        let mut out = one_line(line);
        out.push('\n');
        let _ = std::io::stderr().lock().write_all(out.as_bytes());
    }
}

fn one_line(line: &str) -> String {
    line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_is_16_lowercase_hex_and_new_each_time() {
        let a = random_epoch();
        let b = random_epoch();
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')), "{a}");
        assert_ne!(a, b);
        assert_eq!(format!("{:016x}", fallback_seed()).len(), 16);
    }

    #[test]
    fn the_system_clock_reads_wall_time_in_milliseconds() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        let t = SystemClock.now().as_millis();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(before <= t && t <= after);
    }

    #[test]
    fn a_warn_line_stays_one_line() {
        assert_eq!(one_line("a\nb\rc\td"), "a b c d");
        assert_eq!(one_line("collie: v2"), "collie: v2");
        stderr_warn()("durable-http test: one warn line");
    }
}
