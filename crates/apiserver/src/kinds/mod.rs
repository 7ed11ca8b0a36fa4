//! What the API objects are: names, quantities, selectors, validation, field validation, patches, paging, conversions and the feature gates that shape them.

pub(crate) mod convert;
pub(crate) mod field_validation;
pub(crate) mod gate;
pub(crate) mod names;
pub(crate) mod objects;
pub(crate) mod paging;
pub mod patch;
pub(crate) mod quantity;
pub(crate) mod rbac_objects;
pub(crate) mod secrets;
pub mod selectors;
pub mod validation;
