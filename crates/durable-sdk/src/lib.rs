//! Not built yet: `durable-sdk`, the facade with `open_collie`, comes with the socket issue.
