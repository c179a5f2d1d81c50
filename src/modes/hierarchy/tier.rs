//! Memory tiers as given on the command line: `NAME:CAPACITY[:LATENCY:BANDWIDTH]`.

use crate::modes::size::parse_bytes;

/// One level of the memory hierarchy.
#[derive(Clone, Debug, PartialEq)]
pub struct Tier {
    /// Name, used for the tier's arena.
    pub name: String,
    /// Bytes it holds.
    pub capacity: u64,
    /// Cycles to start one transfer into or out of it.
    pub latency: f64,
    /// Bytes it moves per cycle.
    pub bandwidth: f64,
}

impl Tier {
    /// Cycles to move `bytes` into or out of this tier: latency + bytes / bandwidth.
    pub fn transfer(&self, bytes: u64) -> f64 {
        self.latency + bytes as f64 / self.bandwidth
    }
}

/// Parses the `--tier` specs, fastest first. A tier given without `LATENCY:BANDWIDTH` gets
/// latency 1 and bandwidth 64 B/cycle when it is the first, else 10× the latency and a quarter
/// of the bandwidth of the tier before it.
pub fn parse_tiers(specs: &[String]) -> Result<Vec<Tier>, String> {
    let mut tiers: Vec<Tier> = Vec::with_capacity(specs.len());
    for spec in specs {
        let parts: Vec<&str> = spec.split(':').collect();
        let bad = |why: &str| {
            format!(
                "--tier '{spec}': {why} (expected NAME:CAPACITY[:LATENCY:BANDWIDTH], e.g. sram:2MiB:1:64)"
            )
        };
        let (name, capacity) = match parts.as_slice() {
            [name, capacity] | [name, capacity, _, _] => (*name, *capacity),
            _ => return Err(bad("wrong number of fields")),
        };
        if name.is_empty() {
            return Err(bad("empty name"));
        }
        if tiers.iter().any(|t| t.name == name) {
            return Err(bad("repeated name"));
        }
        let capacity = parse_bytes(capacity).map_err(|e| bad(&e))?;
        if capacity == 0 {
            return Err(bad("capacity must be above 0"));
        }
        let (latency, bandwidth) = match parts.as_slice() {
            [_, _, latency, bandwidth] => {
                let number = |s: &str, what: &str| {
                    s.trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .ok_or_else(|| bad(&format!("{what} '{s}' is not a number ≥ 0")))
                };
                let (l, b) = (number(latency, "latency")?, number(bandwidth, "bandwidth")?);
                if b == 0.0 {
                    return Err(bad("bandwidth must be above 0"));
                }
                (l, b)
            }
            _ => tiers
                .last()
                .map_or((1.0, 64.0), |t| (t.latency * 10.0, t.bandwidth / 4.0)),
        };
        tiers.push(Tier {
            name: name.to_string(),
            capacity,
            latency,
            bandwidth,
        });
    }
    Ok(tiers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        let specs = ["sram:2MiB:1:64".to_string(), "dram:1GiB:200:8".to_string()];
        let tiers = parse_tiers(&specs).unwrap();
        assert_eq!(tiers[0].capacity, 2 << 20);
        assert_eq!(tiers[1].latency, 200.0);
        assert_eq!(tiers[1].transfer(800), 300.0);
        let defaults = parse_tiers(&["a:1K".into(), "b:1M".into()]).unwrap();
        assert_eq!((defaults[1].latency, defaults[1].bandwidth), (10.0, 16.0));
        for bad in [
            "sram",
            "sram:0",
            "sram:2MiB:1",
            ":1K",
            "x:1K:a:1",
            "x:1K:1:0",
        ] {
            assert!(parse_tiers(&[bad.to_string()]).is_err(), "{bad}");
        }
        assert!(parse_tiers(&["a:1K".into(), "a:2K".into()]).is_err());
    }
}
