//! The intermediate representation: graphs of typed values, independent of protobuf details.

mod constant;
mod decoded;
mod dtype;
mod graph;
mod model;
mod order;
mod scatter;
mod types;

pub use constant::{ConstData, Constant};
pub use decoded::Decoded;
pub use dtype::DType;
pub use graph::{Graph, Node, NodeId, NodeUnit, Subgraph, Value, ValueId, ValueKind};
pub use model::{Model, Opsets};
pub use order::steps_of;
pub use scatter::{SCATTER_KEY, scatter_nodes};
pub use types::{Dim, Shape, TensorType, ValueType, concrete, format_shape, known_shape};
