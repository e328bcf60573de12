//! The strict expected-failures baseline (`xtask/collie/conformance/expected-failures.txt`):
//! one `name<TAB>reason` a line, `#` comments. A listed case that passes, or a
//! listed name that matches no case, fails the run, so the list never rots.

use std::collections::BTreeMap;

/// Case name → the reason it is expected to fail.
#[derive(Debug, Default)]
pub struct Baseline {
    /// Case name → reason.
    pub entries: BTreeMap<String, String>,
}

impl Baseline {
    /// Reads the file's text.
    pub fn parse(text: &str) -> Result<Baseline, String> {
        let mut entries = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let (name, reason) = line
                .split_once('\t')
                .ok_or_else(|| format!("line {}: `name<TAB>reason` expected, got {line:?}", n + 1))?;
            let (name, reason) = (name.trim(), reason.trim());
            if name.is_empty() || reason.is_empty() {
                return Err(format!("line {}: an entry needs a case name and a reason", n + 1));
            }
            if entries.insert(name.to_owned(), reason.to_owned()).is_some() {
                return Err(format!("line {}: {name} is listed twice", n + 1));
            }
        }
        Ok(Baseline { entries })
    }

    /// Why this case is expected to fail, if listed.
    pub fn reason(&self, name: &str) -> Option<&str> {
        self.entries.get(name).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::Baseline;

    #[test]
    fn baseline_entries_need_a_tab_and_a_reason() {
        let b = Baseline::parse("# comment\n\nfoo [tls]\tthe desk does X (rule §5)\n").unwrap();
        assert_eq!(b.reason("foo [tls]"), Some("the desk does X (rule §5)"));
        assert!(Baseline::parse("foo [tls] no tab\n").is_err());
        assert!(Baseline::parse("foo [tls]\t  \n").is_err());
        assert!(Baseline::parse("a\tx\na\ty\n").is_err());
    }
}
