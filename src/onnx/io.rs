//! Reading model files: protobuf decode and external-data checks.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Result;
use bytes::Bytes;
use prost::Message;

use super::proto::{GraphProto, ModelProto, TensorProto, tensor_proto::DataLocation};
use crate::{bail_input, input_error};

/// Reads and decodes a model file, checking that its external data files exist and are large
/// enough. Tensor payloads stay slices of the file's bytes (no copy).
pub fn load_model(path: &Path) -> Result<ModelProto> {
    decode_model(path, open_model_file(path)?.bytes)
}

/// A model file's bytes and the open file they came from: payloads decoded from the bytes are
/// slices of them, so a writer can tell where in the file each one lies and let the kernel
/// copy it.
pub struct ModelFile {
    /// The file's bytes (mapped, or read where the file cannot be mapped).
    pub bytes: Bytes,
    file: File,
}

impl ModelFile {
    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where `slice` starts in the file, when it lies within the file's bytes.
    pub fn offset_of(&self, slice: &[u8]) -> Option<u64> {
        let base = self.bytes.as_ptr() as usize;
        let start = (slice.as_ptr() as usize).checked_sub(base)?;
        (start + slice.len() <= self.bytes.len()).then_some(start as u64)
    }
}

/// Opens a model file: its bytes are the file mapped into memory (the pages are the system's
/// file cache, so reading copies nothing), or read into memory where it cannot be mapped
/// (pipes, empty files).
///
/// A mapped file must not be shortened by another program while the pass runs (the process
/// would then be stopped by `SIGBUS`), as with every program that maps its input (git's pack
/// files, ripgrep).
pub fn open_model_file(path: &Path) -> Result<ModelFile> {
    let cannot_read = |e: std::io::Error| input_error!("{}: cannot read: {e}", path.display());
    let file = File::open(path).map_err(cannot_read)?;
    let regular = file.metadata().is_ok_and(|m| m.is_file() && m.len() > 0);
    if regular {
        // SAFETY: the mapping is read-only; see above for the one hazard, a file shortened
        // underneath the mapping.
        if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
            let bytes = Bytes::from_owner(map);
            return Ok(ModelFile { bytes, file });
        }
    }
    let mut data = Vec::new();
    (&file).read_to_end(&mut data).map_err(cannot_read)?;
    Ok(ModelFile {
        bytes: Bytes::from(data),
        file,
    })
}

/// Decodes a model from the bytes of the file at `path` (used for messages and to resolve
/// external data), with the same checks as [`load_model`].
pub fn decode_model(path: &Path, data: Bytes) -> Result<ModelProto> {
    if data.is_empty() {
        bail_input!("{}: file is empty, not an ONNX model", path.display());
    }
    let model = ModelProto::decode(data).map_err(|e| {
        input_error!(
            "{}: not a valid ONNX model (protobuf decode failed: {e})",
            path.display()
        )
    })?;
    if model.graph.is_none() {
        bail_input!("{}: not an ONNX model (no graph)", path.display());
    }
    let dir = model_dir(path);
    for_each_tensor(&model, &mut |tensor| check_external(tensor, &dir, path))?;
    Ok(model)
}

/// The folder a model's relative external-data locations are resolved against.
pub fn model_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The external-data file names a model refers to (deduplicated, in first-use order).
pub fn external_files(model: &ModelProto) -> Vec<String> {
    let mut files = Vec::new();
    let _ = for_each_tensor(model, &mut |t| {
        if let Some(loc) = external_entry(t, "location")
            && !files.contains(&loc)
        {
            files.push(loc);
        }
        Ok(())
    });
    files
}

fn external_entry(tensor: &TensorProto, key: &str) -> Option<String> {
    if tensor.data_location() != DataLocation::External && tensor.external_data.is_empty() {
        return None;
    }
    tensor
        .external_data
        .iter()
        .find(|e| e.key() == key)
        .map(|e| e.value().to_string())
}

fn check_external(tensor: &TensorProto, dir: &Path, model: &Path) -> Result<()> {
    if tensor.data_location() != DataLocation::External {
        return Ok(());
    }
    let Some(location) = external_entry(tensor, "location") else {
        bail_input!(
            "{}: tensor '{}' is stored externally but has no location",
            model.display(),
            tensor.name()
        );
    };
    let rel = Path::new(&location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        bail_input!(
            "{}: tensor '{}' has external location '{location}' outside the model's folder",
            model.display(),
            tensor.name()
        );
    }
    let file = dir.join(rel);
    let len = fs::metadata(&file)
        .map_err(|e| {
            input_error!(
                "{}: tensor '{}' needs external data file {}: {e}",
                model.display(),
                tensor.name(),
                file.display()
            )
        })?
        .len();
    let number = |key: &str| -> Result<Option<u64>> {
        external_entry(tensor, key)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    input_error!(
                        "{}: tensor '{}' has a bad external {key} '{v}'",
                        model.display(),
                        tensor.name()
                    )
                })
            })
            .transpose()
    };
    let offset = number("offset")?.unwrap_or(0);
    let end = match number("length")? {
        Some(length) => offset.saturating_add(length),
        None => offset,
    };
    if end > len {
        bail_input!(
            "{}: tensor '{}' reads bytes {offset}..{end} of {}, which has only {len}",
            model.display(),
            tensor.name(),
            file.display()
        );
    }
    Ok(())
}

/// Calls `f` on every tensor stored in the model: initializers and tensor attributes, in the
/// main graph, in subgraphs and in local functions.
fn for_each_tensor(
    model: &ModelProto,
    f: &mut dyn FnMut(&TensorProto) -> Result<()>,
) -> Result<()> {
    fn graph(g: &GraphProto, f: &mut dyn FnMut(&TensorProto) -> Result<()>) -> Result<()> {
        for t in &g.initializer {
            f(t)?;
        }
        for n in &g.node {
            nodes_attrs(&n.attribute, f)?;
        }
        Ok(())
    }
    fn nodes_attrs(
        attrs: &[super::proto::AttributeProto],
        f: &mut dyn FnMut(&TensorProto) -> Result<()>,
    ) -> Result<()> {
        for a in attrs {
            if let Some(t) = &a.t {
                f(t)?;
            }
            for t in &a.tensors {
                f(t)?;
            }
            if let Some(g) = &a.g {
                graph(g, f)?;
            }
            for g in &a.graphs {
                graph(g, f)?;
            }
        }
        Ok(())
    }
    if let Some(g) = &model.graph {
        graph(g, f)?;
    }
    for func in &model.functions {
        for n in &func.node {
            nodes_attrs(&n.attribute, f)?;
        }
    }
    Ok(())
}
