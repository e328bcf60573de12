//! Not built yet: `durable-pi`, the Pi-style conversation store adapter, comes with its own issue.
