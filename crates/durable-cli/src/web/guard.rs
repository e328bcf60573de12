//! Who may use the page's server: a request must name the run's secret as
//! its first path segment (compared in constant time), come to
//! `127.0.0.1:<port>` or `localhost:<port>` (no DNS rebinding: a foreign
//! name that resolves here carries its own `Host`), and, unless it is a
//! GET or a HEAD, come from the page's own origin (no cross-site POST). A
//! GET with a foreign `Origin` is refused too.

use hyper::header::{HOST, ORIGIN};
use hyper::{HeaderMap, Method, Uri};
use subtle::ConstantTimeEq;

/// What the guard says of a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict<'a> {
    /// Let through: the path after `/<secret>` (`""` or `/…`).
    Pass(&'a str),
    /// Not the secret: `404`, and nothing else said.
    NotFound,
    /// The secret, but a foreign `Host` or `Origin`: `403`.
    Forbidden,
}

/// The run's secret and the port it serves on.
#[derive(Debug)]
pub(crate) struct Guard {
    secret: String,
    port: u16,
}

impl Guard {
    pub(crate) fn new(secret: String, port: u16) -> Guard {
        Guard { secret, port }
    }

    pub(crate) fn secret(&self) -> &str {
        &self.secret
    }

    /// Checks a request's target and headers; nothing of its body.
    pub(crate) fn check<'a>(&self, method: &Method, uri: &'a Uri, headers: &HeaderMap) -> Verdict<'a> {
        let path = uri.path();
        let Some(after) = path.strip_prefix('/') else { return Verdict::NotFound };
        let first = after.split('/').next().unwrap_or("");
        if !bool::from(first.as_bytes().ct_eq(self.secret.as_bytes())) {
            return Verdict::NotFound;
        }
        let rest = &after[first.len()..];
        // The absolute form (`GET http://elsewhere/…`) names a host of its own.
        if uri.scheme().is_some() || uri.authority().is_some() {
            return Verdict::Forbidden;
        }
        if !self.host_ok(headers) || !self.origin_ok(method, headers) {
            return Verdict::Forbidden;
        }
        Verdict::Pass(rest)
    }

    /// Exactly one `Host`: `127.0.0.1:<port>` or `localhost:<port>`.
    fn host_ok(&self, headers: &HeaderMap) -> bool {
        let mut hosts = headers.get_all(HOST).iter();
        let (Some(host), None) = (hosts.next(), hosts.next()) else { return false };
        let port = self.port.to_string();
        let Some((name, given_port)) = host.as_bytes().rsplit_once_byte(b':') else { return false };
        given_port == port.as_bytes() && local_name(name)
    }

    /// GET and HEAD: no `Origin`, or the page's own; anything else: the
    /// page's own, which a browser always sends with such a request.
    fn origin_ok(&self, method: &Method, headers: &HeaderMap) -> bool {
        let mut origins = headers.get_all(ORIGIN).iter();
        let origin = match (origins.next(), origins.next()) {
            (None, _) => None,
            (Some(o), None) => Some(o),
            (Some(_), Some(_)) => return false,
        };
        let safe = *method == Method::GET || *method == Method::HEAD;
        match origin {
            None => safe,
            Some(origin) => {
                let Some(authority) = strip_prefix_ignore_case(origin.as_bytes(), b"http://") else {
                    return false;
                };
                let Some((name, given_port)) = authority.rsplit_once_byte(b':') else { return false };
                given_port == self.port.to_string().as_bytes() && local_name(name)
            }
        }
    }
}

/// `127.0.0.1` or `localhost` (any case).
fn local_name(name: &[u8]) -> bool {
    name == b"127.0.0.1" || name.eq_ignore_ascii_case(b"localhost")
}

fn strip_prefix_ignore_case<'a>(text: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    if text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix) {
        Some(&text[prefix.len()..])
    } else {
        None
    }
}

trait SplitByte {
    fn rsplit_once_byte(&self, byte: u8) -> Option<(&[u8], &[u8])>;
}

impl SplitByte for [u8] {
    fn rsplit_once_byte(&self, byte: u8) -> Option<(&[u8], &[u8])> {
        let at = self.iter().rposition(|b| *b == byte)?;
        Some((&self[..at], &self[at + 1..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn guard() -> Guard {
        Guard::new(SECRET.to_owned(), 8123)
    }

    fn check(method: Method, target: &str, headers: &[(&str, &str)]) -> Verdict<'static> {
        let uri: &'static Uri = Box::leak(Box::new(target.parse::<Uri>().unwrap()));
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        guard().check(&method, uri, &map)
    }

    const HOST_OK: (&str, &str) = ("host", "127.0.0.1:8123");

    #[test]
    fn the_secret_is_the_first_segment_or_nothing() {
        let page = format!("/{SECRET}/");
        assert_eq!(check(Method::GET, &page, &[HOST_OK]), Verdict::Pass("/"));
        assert_eq!(check(Method::GET, &format!("/{SECRET}"), &[HOST_OK]), Verdict::Pass(""));
        assert_eq!(
            check(Method::GET, &format!("/{SECRET}/wire/hello?x=1"), &[HOST_OK]),
            Verdict::Pass("/wire/hello")
        );
        for bad in [
            "/".to_owned(),
            "/index.html".to_owned(),
            format!("/{}/", &SECRET[..31]),
            format!("/{SECRET}0/"),
            format!("/{}/", SECRET.to_uppercase()),
            format!("/x/{SECRET}/"),
            format!("//{SECRET}/"),
            "*".to_owned(),
        ] {
            assert_eq!(check(Method::GET, &bad, &[HOST_OK]), Verdict::NotFound, "{bad}");
        }
        // Even a foreign host learns only `404` without the secret.
        assert_eq!(check(Method::POST, "/", &[("host", "evil.example")]), Verdict::NotFound);
    }

    #[test]
    fn the_host_is_this_port_on_loopback() {
        let page = format!("/{SECRET}/");
        for ok in ["127.0.0.1:8123", "localhost:8123", "LocalHost:8123"] {
            assert_eq!(check(Method::GET, &page, &[("host", ok)]), Verdict::Pass("/"), "{ok}");
        }
        for bad in [
            "evil.example:8123",
            "127.0.0.1",
            "localhost",
            "127.0.0.1:8124",
            "127.0.0.1:80",
            "[::1]:8123",
            "127.0.0.2:8123",
            "localhost.evil.example:8123",
            "127.0.0.1:8123:8123",
            "",
        ] {
            assert_eq!(check(Method::GET, &page, &[("host", bad)]), Verdict::Forbidden, "{bad:?}");
        }
        assert_eq!(check(Method::GET, &page, &[]), Verdict::Forbidden, "no Host");
        assert_eq!(check(Method::GET, &page, &[HOST_OK, HOST_OK]), Verdict::Forbidden, "two Hosts");
        // The absolute form names its own host.
        let absolute = format!("http://evil.example:8123/{SECRET}/");
        assert_eq!(check(Method::GET, &absolute, &[HOST_OK]), Verdict::Forbidden);
    }

    #[test]
    fn writes_need_the_pages_own_origin() {
        let send = format!("/{SECRET}/wire/v1/panes/p/send");
        for ok in ["http://127.0.0.1:8123", "http://localhost:8123", "HTTP://LOCALHOST:8123"] {
            assert_eq!(
                check(Method::POST, &send, &[HOST_OK, ("origin", ok)]),
                Verdict::Pass("/wire/v1/panes/p/send"),
                "{ok}"
            );
        }
        assert_eq!(check(Method::POST, &send, &[HOST_OK]), Verdict::Forbidden, "no Origin");
        for bad in [
            "null",
            "https://127.0.0.1:8123",
            "http://127.0.0.1:8124",
            "http://127.0.0.1",
            "http://evil.example:8123",
            "http://127.0.0.1:8123/",
            "http://127.0.0.1.evil.example:8123",
            "",
        ] {
            assert_eq!(
                check(Method::POST, &send, &[HOST_OK, ("origin", bad)]),
                Verdict::Forbidden,
                "{bad:?}"
            );
            assert_eq!(
                check(Method::GET, &send, &[HOST_OK, ("origin", bad)]),
                Verdict::Forbidden,
                "GET {bad:?}"
            );
        }
        for method in [Method::PUT, Method::DELETE, Method::PATCH, Method::OPTIONS] {
            assert_eq!(check(method.clone(), &send, &[HOST_OK]), Verdict::Forbidden, "{method}");
        }
        let two = [HOST_OK, ("origin", "http://127.0.0.1:8123"), ("origin", "http://127.0.0.1:8123")];
        assert_eq!(check(Method::POST, &send, &two), Verdict::Forbidden, "two Origins");
        // A GET or HEAD without Origin is a navigation or a same-origin read.
        assert_eq!(check(Method::HEAD, &send, &[HOST_OK]), Verdict::Pass("/wire/v1/panes/p/send"));
    }
}
