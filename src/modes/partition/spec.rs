//! The `--partition` file: compute units with their rules, and which nodes run where.
//!
//! ```json
//! {
//!   "units": [
//!     {"name": "npu", "alignment": 128, "quantize_outputs": true},
//!     {"name": "cpu", "alignment": 64}
//!   ],
//!   "default": "cpu",
//!   "op_types": {"Conv": "npu", "Relu": "npu"},
//!   "nodes": {"head/softmax": "cpu"}
//! }
//! ```
//! A node named in `nodes` runs on that unit; otherwise its op type decides; otherwise the
//! default unit (the first unit when `default` is absent).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::ir::Node;

/// One compute unit and its rules.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UnitSpec {
    /// Unit name.
    pub name: String,
    /// Offsets of the buffers it touches are multiples of this.
    #[serde(default = "default_alignment")]
    pub alignment: u64,
    /// Outputs it produces that feed only quantisation nodes are stored quantised.
    #[serde(default)]
    pub quantize_outputs: bool,
}

fn default_alignment() -> u64 {
    64
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    units: Vec<UnitSpec>,
    #[serde(default)]
    default: Option<String>,
    #[serde(default)]
    op_types: BTreeMap<String, String>,
    #[serde(default)]
    nodes: BTreeMap<String, String>,
}

/// A parsed partition.
#[derive(Clone, Debug)]
pub struct Partition {
    /// The units, in file order.
    pub units: Vec<UnitSpec>,
    /// Unit of nodes matched by nothing else.
    pub default: usize,
    /// Unit by op type.
    pub op_types: BTreeMap<String, usize>,
    /// Unit by node name.
    pub nodes: BTreeMap<String, usize>,
}

impl Partition {
    /// Parses the JSON text; errors are one line.
    pub fn parse(text: &str) -> Result<Partition, String> {
        let file: File =
            serde_json::from_str(text).map_err(|e| format!("not a partition file: {e}"))?;
        if file.units.is_empty() {
            return Err("the partition lists no units".into());
        }
        for (i, u) in file.units.iter().enumerate() {
            if u.name.is_empty() || file.units[..i].iter().any(|v| v.name == u.name) {
                return Err(format!("unit name '{}' is empty or repeated", u.name));
            }
            if u.alignment == 0 || u.alignment > 1 << 20 {
                return Err(format!(
                    "unit '{}': alignment {} is not in 1..=1048576",
                    u.name, u.alignment
                ));
            }
        }
        let find = |name: &str, what: &str| {
            file.units
                .iter()
                .position(|u| u.name == name)
                .ok_or_else(|| format!("{what} names unknown unit '{name}'"))
        };
        let default = match &file.default {
            Some(name) => find(name, "'default'")?,
            None => 0,
        };
        let op_types = file
            .op_types
            .iter()
            .map(|(op, unit)| Ok((op.clone(), find(unit, &format!("op type '{op}'"))?)))
            .collect::<Result<_, String>>()?;
        let nodes = file
            .nodes
            .iter()
            .map(|(node, unit)| Ok((node.clone(), find(unit, &format!("node '{node}'"))?)))
            .collect::<Result<_, String>>()?;
        Ok(Partition {
            units: file.units,
            default,
            op_types,
            nodes,
        })
    }

    /// The unit a node runs on.
    pub fn unit_of(&self, node: &Node) -> usize {
        self.nodes
            .get(&node.name)
            .or_else(|| self.op_types.get(&node.op_type))
            .copied()
            .unwrap_or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let p = Partition::parse(
            r#"{"units":[{"name":"npu","alignment":128,"quantize_outputs":true},{"name":"cpu"}],
                "default":"cpu","op_types":{"Conv":"npu"},"nodes":{"c2":"cpu"}}"#,
        )
        .unwrap();
        assert_eq!((p.default, p.op_types["Conv"], p.nodes["c2"]), (1, 0, 1));
        assert_eq!(p.units[1].alignment, 64);
        for bad in [
            r#"{"units":[]}"#,
            r#"{"units":[{"name":"a"},{"name":"a"}]}"#,
            r#"{"units":[{"name":"a","alignment":0}]}"#,
            r#"{"units":[{"name":"a"}],"default":"b"}"#,
            r#"{"units":[{"name":"a"}],"op_types":{"Conv":"b"}}"#,
            r#"{"units":[{"name":"a","colour":"red"}]}"#,
            "not json",
        ] {
            assert!(Partition::parse(bad).is_err(), "{bad}");
        }
    }
}
