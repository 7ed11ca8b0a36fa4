//! The monitor's unit tests, over fakes at its trait boundaries (the API, the driver, the clock).

pub(crate) mod cycle_fakes;
mod get_mode;
mod list_mode;
mod write;
