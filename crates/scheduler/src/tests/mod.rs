//! The scheduler's unit tests.

mod matching;
