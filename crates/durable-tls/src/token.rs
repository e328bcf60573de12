//! Bearer tokens: where they come from, their rules, and the constant-time
//! check.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};
use zeroize::{Zeroize, Zeroizing};

use durable_types::TOKEN_MIN;
pub use durable_types::{TOKEN_ENV, TOKEN_NEXT_ENV};

use crate::error::TlsError;

/// A token's bytes. Its `Debug` says `"<redacted>"`; nothing else prints it,
/// and its bytes are overwritten with zeros when it is dropped.
#[derive(Clone)]
pub(crate) struct Secret(Zeroizing<Vec<u8>>);

impl Secret {
    /// Takes `value` without copying it, so that no unwiped copy is left.
    pub(crate) fn new(value: String) -> Self {
        Secret(Zeroizing::new(value.into_bytes()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// Checks a token's rules: at least [`TOKEN_MIN`] bytes, printable ASCII
/// without spaces. Errors name `which`, never the value.
pub(crate) fn check_rules(which: &'static str, token: &Secret) -> Result<(), TlsError> {
    let bytes = &token.0;
    if bytes.len() < TOKEN_MIN {
        return Err(TlsError::TokenTooShort { which, len: bytes.len() });
    }
    if !bytes.iter().all(|b| b.is_ascii_graphic()) {
        return Err(TlsError::TokenCharacters { which });
    }
    Ok(())
}

/// Reads one token variable: `Ok(None)` when it is unset or empty.
pub(crate) fn from_env(name: &'static str) -> Result<Option<Secret>, TlsError> {
    match std::env::var(name) {
        Ok(value) if value.is_empty() => Ok(None),
        Ok(value) => Ok(Some(Secret::new(value))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(TlsError::TokenCharacters { which: name }),
    }
}

/// The tokens a server accepts, kept as SHA-256 digests so that every check
/// compares fixed-size values. The digests are wiped when the set is dropped:
/// they are not the tokens, but nothing derived from a token outlives its use.
#[derive(Clone)]
pub(crate) struct TokenSet {
    digests: Vec<[u8; 32]>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet").field("tokens", &self.digests.len()).finish()
    }
}

impl TokenSet {
    pub(crate) fn new<'a>(tokens: impl IntoIterator<Item = &'a Secret>) -> Self {
        TokenSet { digests: tokens.into_iter().map(|t| digest(&t.0)).collect() }
    }

    /// Whether `presented` is one of the accepted tokens.
    ///
    /// Constant time with respect to the accepted tokens: the presented
    /// token is hashed, and its digest compared with every accepted digest
    /// with [`subtle`] (no early exit on a mismatch, no short-circuit between
    /// the tokens), so neither the time nor the answer tells which token, or
    /// which of its lengths, came close.
    pub(crate) fn accepts(&self, presented: &[u8]) -> bool {
        let presented = Zeroizing::new(digest(presented));
        let mut ok = Choice::from(0);
        for accepted in &self.digests {
            ok |= presented.ct_eq(accepted);
        }
        ok.into()
    }
}

impl Drop for TokenSet {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl TokenSet {
    /// Overwrites every digest with zeros and forgets them: the set then
    /// accepts nothing.
    fn wipe(&mut self) {
        self.digests.zeroize();
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef";
    const B: &str = "fedcba9876543210fedcba9876543210fedcba";

    fn secret(s: &str) -> Secret {
        Secret::new(s.to_owned())
    }

    #[test]
    fn a_wiped_token_set_holds_no_digest_and_accepts_nothing() {
        let mut set = TokenSet::new([&secret(A)]);
        assert!(set.accepts(A.as_bytes()));
        set.wipe();
        assert!(set.digests.is_empty());
        assert!(!set.accepts(A.as_bytes()));
        // Nor does it accept what a zeroed digest would have matched.
        assert!(!set.accepts(b""));
    }

    #[test]
    fn either_accepted_token_passes_and_nothing_else() {
        let set = TokenSet::new([&secret(A), &secret(B)]);
        assert!(set.accepts(A.as_bytes()));
        assert!(set.accepts(B.as_bytes()));
        assert!(!set.accepts(b""));
        assert!(!set.accepts(&A.as_bytes()[..31]));
        assert!(!set.accepts(format!("{A}0").as_bytes()));
        assert!(!set.accepts(A.to_uppercase().as_bytes()));
        let one = TokenSet::new([&secret(A)]);
        assert!(one.accepts(A.as_bytes()));
        assert!(!one.accepts(B.as_bytes()));
    }

    #[test]
    fn a_token_under_32_bytes_breaks_the_token_rule_and_is_not_named() {
        let short = secret(&A[..31]);
        let e = check_rules(TOKEN_ENV, &short).unwrap_err();
        assert!(matches!(e, TlsError::TokenTooShort { which: "COLLIE_TOKEN", len: 31 }));
        let text = format!("{e} {e:?}");
        assert!(text.contains("COLLIE_TOKEN") && !text.contains(&A[..31]), "{text}");
        assert!(check_rules(TOKEN_ENV, &secret(A)).is_ok());
    }

    #[test]
    fn a_token_with_spaces_or_control_characters_is_refused() {
        for bad in [format!("{A} x"), format!("{A}\n"), format!("{A}é")] {
            let e = check_rules("token", &Secret::new(bad.clone())).unwrap_err();
            assert!(matches!(e, TlsError::TokenCharacters { which: "token" }));
            assert!(!format!("{e} {e:?}").contains(A));
        }
    }

    #[test]
    fn a_secret_debugs_as_redacted() {
        assert_eq!(format!("{:?}", secret(A)), "\"<redacted>\"");
        let set = TokenSet::new([&secret(A)]);
        assert!(!format!("{set:?}").contains(A));
    }
}
