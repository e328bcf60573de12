//! Examples (hello, desk) come with their issues.
