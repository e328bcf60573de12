//! Not built yet: `durable-socket`, the private Unix socket server, comes with the socket issue.
