//! Provider transcript formats (work in progress).
#![forbid(unsafe_code)]
