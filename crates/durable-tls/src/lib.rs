//! Not built yet: `durable-tls`, the HTTPS server with bearer tokens, comes with the TLS issue.
