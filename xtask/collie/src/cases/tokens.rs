//! §1.2 HTTPS with a bearer token: refused without it, the rotation token, the
//! start-up refusal of a short token, and the token never printed.

use super::Ctx;
use crate::check::{CaseResult, ensure};
use crate::desk::Started;

pub(crate) async fn token_shorter_than_32_bytes_refused_at_startup(cx: Ctx) -> CaseResult {
    let mut spec = cx.spec(&[]);
    spec.token = "short-token-31-bytes-xxxxxxxxxx".to_owned();
    spec.token_next = String::new();
    match crate::desk::Desk::try_start(spec).await? {
        Started::Listening(desk) => Err(format!("a 31-byte COLLIE_TOKEN started a desk at {}", desk.address)),
        Started::Exited { status, .. } => {
            ensure!(!status.success(), "the desk exited with success on a short token");
            Ok(())
        }
    }
}
