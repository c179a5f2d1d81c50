//! `plan`'s flags for the advanced modes and the figures: memory tiers (S1), a device budget
//! (S4), a partition onto compute units (S5), the space-time diagram and the HTML report.

use std::path::PathBuf;

use anyhow::Result;

use crate::emit::{ColourBy, render_html, render_svg};
use crate::modes::hierarchy::parse_tiers;
use crate::modes::partition::Partition;
use crate::modes::size::parse_bytes;
use crate::modes::{ModeOptions, offload};
use crate::pipeline::Planned;
use crate::{bail_input, input_error, onnx};

/// Flags of the advanced modes and figures.
#[derive(clap::Args, Debug, Default)]
pub struct ModeArgs {
    /// A memory tier `NAME:CAPACITY[:LATENCY:BANDWIDTH]`, repeated, fastest first, e.g.
    /// `--tier sram:2MiB:1:64 --tier dram:1GiB:200:8` (latency in cycles, bandwidth in bytes
    /// per cycle). Places every tensor in a tier by S1's rules and search.
    #[arg(long = "tier", value_name = "SPEC", conflicts_with_all = ["budget", "partition"])]
    pub tiers: Vec<String>,
    /// Steps per segment of the hierarchy search (more: slower, sometimes better).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=6))]
    pub segment: u64,
    /// Device memory budget, e.g. `4MiB`: when the plan needs more, buffers wait in host
    /// memory between uses (S4), migrating as few bytes as found.
    #[arg(long, value_name = "BYTES", conflicts_with = "partition")]
    pub budget: Option<String>,
    /// Seconds of work the hierarchy or budget search may spend (the best plan so far is kept;
    /// a wall-clock safety stop at ten times this).
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub search_time: f64,
    /// Work units the hierarchy or budget search may spend (default: 30 million per second of
    /// --search-time, which is then only a safety stop).
    #[arg(long, value_name = "UNITS")]
    pub search_work: Option<u64>,
    /// Compute units and node assignments (JSON; see `modes::partition`).
    #[arg(long, value_name = "FILE")]
    pub partition: Option<PathBuf>,
    /// Write the space-time diagram (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write an HTML report: the summary, the diagram and the tables.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Colour the diagram's rectangles by tensor kind or by tier.
    #[arg(long, value_enum, default_value = "kind")]
    pub colour_by: ColourBy,
}

impl ModeArgs {
    /// The mode options these flags describe; bad values are input errors.
    pub fn options(&self) -> Result<ModeOptions> {
        let tiers = parse_tiers(&self.tiers).map_err(|e| input_error!("{e}"))?;
        let budget = self
            .budget
            .as_deref()
            .map(|b| parse_bytes(b).map_err(|e| input_error!("--budget {e}")))
            .transpose()?;
        if budget == Some(0) {
            bail_input!("--budget must be above 0");
        }
        let partition = match &self.partition {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| input_error!("{}: cannot read: {e}", path.display()))?;
                Some(Partition::parse(&text).map_err(|e| input_error!("{}: {e}", path.display()))?)
            }
            None => None,
        };
        if !self.search_time.is_finite() || self.search_time < 0.0 {
            bail_input!("--search-time must be a number of seconds ≥ 0");
        }
        Ok(ModeOptions {
            tiers,
            segment: self.segment as usize,
            budget,
            search_work: self.search_work,
            partition,
            offload: offload::Options {
                time_limit: std::time::Duration::from_secs_f64(self.search_time),
                ..offload::Options::default()
            },
        })
    }

    /// Stages the figures asked for.
    pub fn write_figures(&self, planned: &Planned, outputs: &mut onnx::Outputs) -> Result<()> {
        if let Some(path) = &self.svg {
            outputs.bytes(path, render_svg(&planned.table, self.colour_by).as_bytes())?;
        }
        if let Some(path) = &self.html {
            let page = render_html(&planned.table, &planned.summary(), self.colour_by);
            outputs.bytes(path, page.as_bytes())?;
        }
        Ok(())
    }
}
