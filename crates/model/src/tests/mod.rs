//! Support the model's unit tests share (each module keeps its own tests beside its code).

pub(crate) mod conditions;
