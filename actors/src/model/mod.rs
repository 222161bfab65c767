//! The API model: served resource types, stored objects, selectors and validation.

mod filter;
mod object;
pub mod quantity;
pub mod resources;
mod selector;
pub mod validation;

pub use filter::ObjectFilter;
pub use object::{ObjectKey, StoredObject};
pub use quantity::QuantityError;
pub use resources::{ResourceType, Subresource};
pub use selector::{FieldSelector, FieldValues, LabelSelector, SelectorError};
pub use validation::FieldError;
