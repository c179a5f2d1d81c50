//! A hand-built model written to disk and typed by the pipeline, as the split tests start.

use std::path::{Path, PathBuf};

use onnx_memplan::ir::Model;
use onnx_memplan::onnx::proto::ModelProto;
use onnx_memplan::pipeline::load_typed;

/// A model file as the pipeline reads it: its path, its protobuf, its typed form and the
/// stored order of its nodes (the order the row and tile chains are built in).
pub struct Typed {
    /// Where the model was written.
    pub path: PathBuf,
    /// The decoded protobuf.
    pub proto: ModelProto,
    /// The typed model.
    pub model: Model,
    /// Node indices `0..n`, the stored order.
    pub order: Vec<usize>,
}

impl Typed {
    /// Loads and types the model at `path` (panics on a model the pipeline refuses).
    pub fn load(path: &Path) -> Typed {
        let (proto, model, _) = load_typed(path, &Default::default()).unwrap();
        let order = (0..model.graph.nodes.len()).collect();
        Typed {
            path: path.to_path_buf(),
            proto,
            model,
            order,
        }
    }

    /// Writes `model` to `dir/name`, then loads it as [`Typed::load`] does.
    pub fn write(dir: &Path, name: &str, model: &ModelProto) -> Typed {
        let path = dir.join(name);
        super::write_model(model, &path);
        Typed::load(&path)
    }

    /// The typed graph.
    pub fn graph(&self) -> &onnx_memplan::ir::Graph {
        &self.model.graph
    }
}
