//! The detector's unit tests.

mod detector;
