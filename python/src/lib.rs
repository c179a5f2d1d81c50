//! The Python module `onnx_memplan._native`: a thin binding over the library. The Python API in
//! `python/onnx_memplan/` turns keyword arguments into `plan`'s flags, which are parsed here by
//! the command line's own parser, so the two front ends cannot drift apart.

/// The command's allocator (see src/main.rs): the split search makes and drops many small
/// structures per trial.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use onnx_memplan::cli::{self, plan::PlanArgs};
use onnx_memplan::emit::{self, ColourBy, render_html, render_svg};
use onnx_memplan::error::is_input_error;
use onnx_memplan::modes::partition::Partition;
use onnx_memplan::pipeline::{self, Planned};
use prost::Message;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(
    _native,
    InputError,
    PyValueError,
    "A bad model, table or option: the message is the command line's one-line error."
);

/// The Python error for a library error: `InputError` for bad input, else `RuntimeError`.
fn to_py(e: anyhow::Error) -> PyErr {
    let line = format!("{e:#}").replace('\n', " ");
    if is_input_error(&e) {
        InputError::new_err(line)
    } else {
        PyRuntimeError::new_err(line)
    }
}

/// Where a model comes from: a file (external data in its folder), or serialized bytes with no
/// file (external data in `base_dir`).
enum Source {
    File(PathBuf),
    Memory { data: Bytes, base_dir: PathBuf },
}

impl Source {
    fn new(path: Option<PathBuf>, data: Option<Vec<u8>>, base_dir: Option<PathBuf>) -> Self {
        match data {
            Some(data) => Source::Memory {
                data: Bytes::from(data),
                base_dir: base_dir.unwrap_or_else(|| PathBuf::from(".")),
            },
            None => Source::File(path.unwrap_or_default()),
        }
    }

    /// The path naming the model in messages (a model in memory: `<base_dir>/<model>`).
    fn path(&self) -> PathBuf {
        match self {
            Source::File(path) => path.clone(),
            Source::Memory { base_dir, .. } => pipeline::in_memory_path(base_dir),
        }
    }

    /// `plan`'s command line for this model and `flags`, parsed by the CLI's own parser.
    fn plan_args(&self, flags: Vec<String>) -> PyResult<PlanArgs> {
        let mut line = vec![self.path().to_string_lossy().into_owned()];
        line.extend(flags);
        cli::plan::parse_args(&line).map_err(|e| self.error(e))
    }

    /// The Python error for a library error about this model: [`to_py`]'s, a model in memory
    /// named `<model>` (without the folder of its external data).
    fn error(&self, e: anyhow::Error) -> PyErr {
        match self {
            Source::File(_) => to_py(e),
            Source::Memory { .. } => {
                let path = self.path().display().to_string();
                let line = format!("{e:#}")
                    .replace('\n', " ")
                    .replace(&path, pipeline::IN_MEMORY);
                if is_input_error(&e) {
                    InputError::new_err(line)
                } else {
                    PyRuntimeError::new_err(line)
                }
            }
        }
    }
}

/// How often the waiting thread takes the GIL back to look for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Runs `work` on another thread with the GIL released. This thread sleeps until the work is
/// done, waking every [`SIGNAL_POLL`] to run Python's signal handlers; on `KeyboardInterrupt`
/// (or any exception a handler raises) it sets `cancel`, if given, so that the planner searches
/// stop at their next check, waits for the work to return and raises the exception. An error
/// of the work is raised as `source` names it ([`Source::error`]).
fn run_detached<T: Send>(
    py: Python<'_>,
    cancel: Option<&AtomicBool>,
    source: &Source,
    work: impl FnOnce() -> anyhow::Result<T> + Send,
) -> PyResult<T> {
    let waiter = std::thread::current();
    std::thread::scope(|scope| {
        let handle = scope.spawn(move || {
            let result = work();
            waiter.unpark();
            result
        });
        let mut interrupted = None;
        while !handle.is_finished() {
            py.detach(|| std::thread::park_timeout(SIGNAL_POLL));
            if interrupted.is_none()
                && let Err(e) = py.check_signals()
            {
                if let Some(cancel) = cancel {
                    cancel.store(true, Ordering::Relaxed);
                }
                interrupted = Some(e);
            }
        }
        let result = handle
            .join()
            .map_err(|_| PyRuntimeError::new_err("internal error: the planner panicked"))?;
        match interrupted {
            Some(e) => Err(e),
            None => result.map_err(|e| source.error(e)),
        }
    })
}

/// A verified plan (see `onnx_memplan.Plan`).
#[pyclass(frozen, module = "onnx_memplan._native")]
struct NativePlan {
    planned: Mutex<Planned>,
    source: PathBuf,
    in_memory: bool,
    /// The default files are `<stem>.memplan.onnx` and `<stem>.memplan.json`.
    stem: String,
}

impl NativePlan {
    /// A plan of `source`. Its table records the SHA-256 of the default annotated file from the
    /// start (a split plan's table describes the rewritten model, so its `model` names that
    /// file), as the command line's table does.
    fn new(mut planned: Planned, source: &Source) -> Self {
        let stem = match source {
            Source::File(path) => path
                .file_stem()
                .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned()),
            Source::Memory { .. } => "model".to_string(),
        };
        planned.annotated_bytes(
            &format!("{stem}.memplan.json"),
            &format!("{stem}.memplan.onnx"),
        );
        NativePlan {
            planned: Mutex::new(planned),
            source: source.path(),
            in_memory: matches!(source, Source::Memory { .. }),
            stem,
        }
    }
}

#[pymethods]
impl NativePlan {
    /// The allocation table as JSON text.
    fn table_json(&self) -> PyResult<String> {
        let planned = self.planned.lock().expect("not poisoned");
        serde_json::to_string(&planned.table).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// The one-line summary.
    fn summary(&self) -> String {
        self.planned.lock().expect("not poisoned").summary()
    }

    /// The summary as JSON text (`plan --json`).
    fn summary_json(&self) -> String {
        self.planned
            .lock()
            .expect("not poisoned")
            .summary_json()
            .to_string()
    }

    /// Warnings of inference (declared types that disagree).
    fn warnings(&self) -> Vec<String> {
        let planned = self.planned.lock().expect("not poisoned");
        planned.report.disagreements.clone()
    }

    /// The annotated model's bytes, naming `<stem>.memplan.json` as its sidecar (a split
    /// plan's table then names `<stem>.memplan.onnx` as its model).
    fn annotated<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut planned = self.planned.lock().expect("not poisoned");
        let bytes = planned.annotated_bytes(
            &format!("{}.memplan.json", self.stem),
            &format!("{}.memplan.onnx", self.stem),
        );
        PyBytes::new(py, &bytes)
    }

    /// The space-time diagram (SVG text).
    fn svg(&self, colour_by: &str) -> PyResult<String> {
        let planned = self.planned.lock().expect("not poisoned");
        Ok(render_svg(&planned.table, colour(colour_by)?))
    }

    /// The HTML report.
    fn html(&self, colour_by: &str) -> PyResult<String> {
        let planned = self.planned.lock().expect("not poisoned");
        Ok(render_html(
            &planned.table,
            &planned.summary(),
            colour(colour_by)?,
        ))
    }

    /// The C header (`plan --header`; `all`: `--header-all`).
    fn header(&self, all: bool) -> String {
        let planned = self.planned.lock().expect("not poisoned");
        let which = if all {
            emit::HeaderTensors::All
        } else {
            emit::HeaderTensors::Io
        };
        emit::render_header(&planned.table, &self.stem, which)
    }

    /// Writes the annotated model at `output` and the table at `table` (default: beside
    /// `output`) as `onnx-memplan plan` does; returns both paths.
    #[pyo3(signature = (output, table=None))]
    fn save(&self, output: PathBuf, table: Option<PathBuf>) -> PyResult<(PathBuf, PathBuf)> {
        let table = table.unwrap_or_else(|| cli::plan::table_beside(&output));
        let mut planned = self.planned.lock().expect("not poisoned");
        let mut write = || -> anyhow::Result<()> {
            if !self.in_memory {
                cli::plan::refuse_overwrite(&self.source, &[&output, &table])?;
            }
            let mut outputs = onnx_memplan::onnx::Outputs::new();
            cli::plan::stage_outputs(&mut planned, &self.source, &output, &table, &mut outputs)?;
            outputs.commit()
        };
        write().map_err(to_py)?;
        Ok((output, table))
    }
}

fn colour(name: &str) -> PyResult<ColourBy> {
    <ColourBy as clap::ValueEnum>::from_str(name, false).map_err(|_| {
        InputError::new_err(format!("colour_by must be 'kind' or 'tier', not '{name}'"))
    })
}

/// Plans a model: `path` or `data` (serialized bytes, external data in `base_dir`), `flags`
/// as `onnx-memplan plan` takes them, and a partition given as JSON text instead of a file.
#[pyfunction]
#[pyo3(signature = (path, data, base_dir, flags, partition_json=None))]
fn plan(
    py: Python<'_>,
    path: Option<PathBuf>,
    data: Option<Vec<u8>>,
    base_dir: Option<PathBuf>,
    flags: Vec<String>,
    partition_json: Option<String>,
) -> PyResult<NativePlan> {
    let source = Source::new(path, data, base_dir);
    let args = source.plan_args(flags)?;
    if let Some(header) = &args.header
        && let Source::File(model) = &source
    {
        cli::plan::refuse_overwrite(model, &[header]).map_err(to_py)?;
    }
    let mut options = args.options().map_err(|e| source.error(e))?;
    if let Some(text) = partition_json {
        options.modes.partition = Some(
            Partition::parse(&text).map_err(|e| InputError::new_err(format!("partition: {e}")))?,
        );
    }
    let cancel = Arc::new(AtomicBool::new(false));
    options.cancel = Some(cancel.clone());
    let planned = run_detached(py, Some(&cancel), &source, || match &source {
        Source::File(path) => pipeline::plan_model(path, &options),
        Source::Memory { data, base_dir } => {
            pipeline::plan_in_memory(data.clone(), base_dir, &options)
        }
    })?;
    let native = NativePlan::new(planned, &source);
    if let Some(header) = &args.header {
        let planned = native.planned.lock().expect("not poisoned");
        let mut outputs = onnx_memplan::onnx::Outputs::new();
        let write = cli::plan::stage_header(
            &planned,
            &native.stem,
            header,
            args.header_all,
            &mut outputs,
        )
        .and_then(|()| outputs.commit());
        write.map_err(|e| source.error(e))?;
    }
    Ok(native)
}

/// Checks a table (JSON text) against a model; returns the problems (empty: valid).
#[pyfunction]
#[pyo3(signature = (path, data, base_dir, table_json))]
fn verify(
    py: Python<'_>,
    path: Option<PathBuf>,
    data: Option<Vec<u8>>,
    base_dir: Option<PathBuf>,
    table_json: String,
) -> PyResult<Vec<String>> {
    let source = Source::new(path, data, base_dir);
    run_detached(py, None, &source, || {
        let table = pipeline::parse_table(&table_json, "table")?;
        match &source {
            Source::File(path) => pipeline::verify_table(path, &table),
            Source::Memory { data, .. } => {
                pipeline::verify_table_bytes(&source.path(), data.clone(), &table)
            }
        }
    })
}

/// The model with every inferred type written in (serialized), as `onnx-memplan shapes -o`
/// writes it; `flags` are the shape flags of `plan` (`--dim`, `--input-shape`, ...).
#[pyfunction]
#[pyo3(signature = (path, data, base_dir, flags))]
fn shapes<'py>(
    py: Python<'py>,
    path: Option<PathBuf>,
    data: Option<Vec<u8>>,
    base_dir: Option<PathBuf>,
    flags: Vec<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let source = Source::new(path, data, base_dir);
    let infer = source.plan_args(flags)?.shapes.infer_options();
    let typed = run_detached(py, None, &source, || {
        let (proto, model, _) = match &source {
            Source::File(path) => pipeline::load_typed(path, &infer)?,
            Source::Memory { data, .. } => {
                pipeline::load_typed_bytes(&source.path(), data.clone(), &infer)?
            }
        };
        Ok(emit::with_inferred_types(&proto, &model.graph, infer.binds_shapes()).encode_to_vec())
    })?;
    Ok(PyBytes::new(py, &typed))
}

#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    let line = std::iter::once("onnx-memplan".to_string()).chain(argv);
    py.detach(|| cli::main(line))
}

/// The long flags of `plan` with their defaults (for checking that the Python API offers
/// every one, with the same defaults).
#[pyfunction]
fn plan_flags() -> Vec<(String, Option<String>)> {
    cli::plan::flag_defaults()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add_class::<NativePlan>()?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(shapes, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(plan_flags, m)?)?;
    Ok(())
}
