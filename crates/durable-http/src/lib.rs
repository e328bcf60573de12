//! Not built yet: `durable-http`, the hyper/tokio glue the servers share, comes with the socket issue.
