//! Tiling a chain: the region of every chain tensor each tile computes (exactly the receptive
//! field of the tile's part of the output), the halo it recomputes and the extra MACs.

use super::chain::{Chain, Read};
use super::dequantize;
use super::macs::{input_macs_per_position, macs_per_position};
use super::region::{Region, Span, full, hull};
use super::rules::{Rule, shape_of};
use crate::ir::Graph;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::Arc;

/// One tile: its part of the chain output and what each chain node computes for it.
#[derive(Clone, Debug)]
pub struct Tile {
    /// Grid position (row, column).
    pub at: [usize; 2],
    /// The tile's part of the chain output.
    pub part: Region,
    /// For each chain node, the region of its output the tile computes.
    pub computed: Vec<Region>,
    /// For each chain node, the region its tile copy makes: `computed` except for upsampling
    /// nodes, whose copy makes an aligned region holding it (then cropped to `computed`);
    /// in the whole output's coordinates, so it may start before row 0.
    pub produced: Vec<Region>,
    /// For each of the chain's other outputs ([`Chain::extra`]), the tile's part of it.
    pub extra_parts: Vec<Region>,
    /// For each chain node and input, the region read (unclipped: positions outside the
    /// input are padding); `None` for inputs read whole or absent.
    pub reads: Vec<Vec<Option<Region>>>,
}

/// A chain cut into a grid of tiles.
#[derive(Clone, Debug)]
pub struct Tiling {
    /// Tiles along H and along W.
    pub grid: [usize; 2],
    /// The tiles' regions ([`Tiling::each`] gives the tiles).
    parts: Parts,
    /// MACs the tiles compute beyond the unsplit chain (halo recompute).
    pub extra_macs: u64,
    /// Positions computed beyond the unsplit chain, per chain node (summed over tiles).
    pub halo: Vec<i64>,
    /// Row strips that compute each row once ([`stream`]): a tile reads the rows of chain
    /// tensors above its own from the earlier tiles' results.
    pub streamed: bool,
}

/// Where a tiling's tiles come from. A grid's tile takes its rows from its row strip and its
/// columns from its column strip, so a grid keeps its `rows + cols` strips and crosses them
/// when a tile is read: the search grades every grid of every chain it meets, reading each
/// tile once, and building whole tiles (`rows × cols` of them, each with regions for every
/// chain node) for that took much of its time on MobileNetV2.
#[derive(Clone, Debug)]
enum Parts {
    /// Row strips (every column) and column strips (every row), shared with the other grids
    /// of as many rows or columns ([`Strips`]).
    Crossed { rows: Arc<[Tile]>, cols: Arc<[Tile]> },
    /// The tiles themselves (streamed strips, which are not crosses).
    Listed(Vec<Tile>),
}

impl Tiling {
    /// The tiles, row by row, read in place.
    pub fn each(&self) -> impl Iterator<Item = TileRef<'_>> + '_ {
        let (rows, cols, listed): (&[Tile], &[Tile], &[Tile]) = match &self.parts {
            Parts::Crossed { rows, cols } => (rows, cols, &[]),
            Parts::Listed(tiles) => (&[], &[], tiles),
        };
        let crossed = rows.iter().enumerate().flat_map(move |(i, row)| {
            let along = cols.iter().enumerate();
            along.map(move |(j, col)| TileRef {
                row,
                col: Some(col),
                at: [i, j],
            })
        });
        listed.iter().map(TileRef::whole).chain(crossed)
    }

    /// The tiles, row by row.
    pub fn tiles(&self) -> Vec<Tile> {
        self.each().map(|t| t.to_tile()).collect()
    }

    /// How many tiles there are.
    pub fn len(&self) -> usize {
        match &self.parts {
            Parts::Crossed { rows, cols } => rows.len() * cols.len(),
            Parts::Listed(tiles) => tiles.len(),
        }
    }

    /// Whether there are no tiles (never, for a tiling [`tile`] or [`stream`] gave).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One tile's regions, read where the tiling keeps them: its rows from its row strip and its
/// columns from its column strip, or a listed tile's own. Estimates read every tile of every
/// grid they grade this way, building none.
#[derive(Clone, Copy, Debug)]
pub struct TileRef<'a> {
    /// The row strip (or the listed tile).
    row: &'a Tile,
    /// The column strip, for a crossed tile.
    col: Option<&'a Tile>,
    /// Grid position (row, column).
    at: [usize; 2],
}

impl<'a> TileRef<'a> {
    /// A tile read as itself.
    pub fn whole(tile: &'a Tile) -> TileRef<'a> {
        TileRef {
            row: tile,
            col: None,
            at: tile.at,
        }
    }

    /// The region whose rows are `row`'s and whose columns are those of `col` applied to
    /// the column strip.
    fn pair(&self, row: Region, col: impl Fn(&Tile) -> Region) -> Region {
        match self.col {
            Some(c) => [row[0], col(c)[1]],
            None => row,
        }
    }

    /// Grid position (row, column).
    pub fn at(&self) -> [usize; 2] {
        self.at
    }

    /// The tile's part of the chain output.
    pub fn part(&self) -> Region {
        self.pair(self.row.part, |c| c.part)
    }

    /// The region of chain node `k`'s output the tile computes.
    pub fn computed(&self, k: usize) -> Region {
        self.pair(self.row.computed[k], |c| c.computed[k])
    }

    /// The tile's part of the chain's `o`-th other output.
    pub fn extra_part(&self, o: usize) -> Region {
        self.pair(self.row.extra_parts[o], |c| c.extra_parts[o])
    }

    /// The region chain node `k` reads of its input `i` (see [`Tile::reads`]).
    pub fn read(&self, k: usize, i: usize) -> Option<Region> {
        let row = self.row.reads[k][i]?;
        match self.col {
            Some(c) => Some([row[0], c.reads[k][i]?[1]]),
            None => Some(row),
        }
    }

    /// The tile itself.
    pub fn to_tile(self) -> Tile {
        match self.col {
            Some(col) => cross(self.row, col, self.at),
            None => self.row.clone(),
        }
    }
}

/// Cuts the chain by `grid` the cheapest way: row strips of a chain that can stream
/// ([`stream`]: no recomputation), else tiles recomputing their halos ([`tile_within`], `None`
/// beyond `max_macs`).
pub fn cut_within(graph: &Graph, chain: &Chain, grid: [usize; 2], max_macs: u64) -> Option<Tiling> {
    Strips::new(graph, chain).cut_within(grid, max_macs)
}

/// The strips of one chain along H (row strips, every column) and along W (column strips,
/// every row), by their count, made once for every grid that cuts the chain: a grid's row
/// strips depend on its rows only and its column strips on its columns only, so the 63 grids
/// up to 8×8 need 16 strip sets, not 574 strips.
pub struct Strips<'c> {
    graph: &'c Graph,
    chain: &'c Chain,
    made: RefCell<FxHashMap<(usize, usize), Made>>,
}

/// The strips along an axis, or `None` when they cannot cut the chain.
type Made = Option<Arc<[Tile]>>;

impl<'c> Strips<'c> {
    /// No strips of `chain` made yet.
    pub fn new(graph: &'c Graph, chain: &'c Chain) -> Strips<'c> {
        Strips {
            graph,
            chain,
            made: RefCell::default(),
        }
    }

    /// The chain.
    pub fn chain(&self) -> &'c Chain {
        self.chain
    }

    /// [`cut_within`].
    pub fn cut_within(&self, grid: [usize; 2], max_macs: u64) -> Option<Tiling> {
        self.cut_costed(grid, max_macs)?.ok()
    }

    /// [`cut_within`], telling tiles that recompute more than `max_macs` (`Err` with their
    /// extra MACs) from grids that cannot cut the chain (`None`).
    pub fn cut_costed(&self, grid: [usize; 2], max_macs: u64) -> Option<Result<Tiling, u64>> {
        match grid {
            [rows, 1] if rows > 1 && streams(self.chain) => self.stream(rows).map(Ok),
            _ => self.tile_costed(grid, max_macs),
        }
    }

    /// The `count` strips along `axis` (0: rows, 1: columns) of the chain's output, each
    /// spanning the other axis whole; `None` when an output has fewer positions along the axis
    /// than `count`, or a strip's node would read nothing but padding.
    fn along(&self, axis: usize, count: usize) -> Made {
        if let Some(made) = self.made.borrow().get(&(axis, count)) {
            return made.clone();
        }
        let made = self.make(axis, count);
        self.made.borrow_mut().insert((axis, count), made.clone());
        made
    }

    /// [`Strips::along`], made.
    fn make(&self, axis: usize, count: usize) -> Made {
        let (graph, chain) = (self.graph, self.chain);
        let [h, w] = chain.grids[chain.last];
        let length = [h, w][axis];
        let spans = Span::parts(length, count as i64);
        // The other outputs are cut in proportion, every part non-empty.
        let mut extra_parts = Vec::with_capacity(chain.extra.len());
        for &k in &chain.extra {
            extra_parts.push(scaled(&spans, length, chain.grids[k][axis])?);
        }
        let whole = |k: usize| full(chain.grids[k][0], chain.grids[k][1]);
        spans
            .iter()
            .enumerate()
            .map(|(i, &span)| {
                let mut part = full(h, w);
                part[axis] = span;
                let extra = chain
                    .extra
                    .iter()
                    .zip(&extra_parts)
                    .map(|(&k, parts)| {
                        let mut r = whole(k);
                        r[axis] = parts[i];
                        r
                    })
                    .collect();
                let mut at = [0, 0];
                at[axis] = i;
                let tile = propagate(chain, at, part, extra)?;
                (!reads_only_padding(graph, chain, &tile, axis)).then_some(tile)
            })
            .collect()
    }
}

/// Whether the chain's row strips can stream: NCHW throughout, every node a window or
/// pointwise (an upsampling node's copies make aligned regions, token-major nodes hold rows
/// as token ranges).
fn streams(chain: &Chain) -> bool {
    !chain.bands_only()
        && chain
            .rules
            .iter()
            .all(|r| matches!(r, Rule::Window(_) | Rule::Pointwise(_)))
}

/// The chain cut into `rows` row strips that compute every row of every node once, as a
/// line buffer does: strip `t` computes the rows of each node from where strip `t − 1`
/// stopped to where its own receptive field ends (the end [`tile`] gives it), and reads the
/// rows above from the earlier strips' results; no MAC is recomputed. Each strip's part of
/// every chain output is the rows it computes. `None` when some strip would compute no row of
/// some node, or when [`tile`] gives none.
pub fn stream(graph: &Graph, chain: &Chain, rows: usize) -> Option<Tiling> {
    Strips::new(graph, chain).stream(rows)
}

impl Strips<'_> {
    /// [`stream`].
    fn stream(&self, rows: usize) -> Option<Tiling> {
        let (graph, chain) = (self.graph, self.chain);
        let base = self.tile_costed([rows, 1], u64::MAX)?.ok()?;
        let n = chain.nodes.len();
        let recomputed: Vec<bool> = (0..n)
            .map(|k| dequantize::recomputed(graph, chain, k))
            .collect();
        let mut done = vec![0i64; n];
        // Rows of recomputed nodes, summed over the strips.
        let mut recomputed_rows = vec![0i64; n];
        let mut tiles = Vec::with_capacity(rows);
        for strip in base.tiles() {
            let mut computed = strip.computed.clone();
            for k in (0..n).filter(|&k| !recomputed[k]) {
                let end = strip.computed[k][0].end;
                if end <= done[k] {
                    return None;
                }
                computed[k][0] = Span::new(done[k], end);
                done[k] = end;
            }
            // A recomputed DQ makes the rows its readers read in this strip, from the rows of
            // its integer input (which stream).
            for k in (0..n).rev().filter(|&k| recomputed[k]) {
                let [h, _] = chain.grids[k];
                let rows = chain.readers[k]
                    .iter()
                    .filter_map(|&(r, i)| need(&chain.rules[r], &chain.reads[r][i], computed[r]))
                    .map(|region| region[0].clip(h))
                    .reduce(Span::hull)?;
                computed[k][0] = rows;
                recomputed_rows[k] += rows.len();
            }
            let reads = (0..n)
                .map(|k| {
                    let region = computed[k];
                    chain.reads[k]
                        .iter()
                        .zip(&strip.reads[k])
                        .map(|(read, whole)| {
                            let mut need = need(&chain.rules[k], read, region)?;
                            // Columns as the strip reads them (every strip spans every column).
                            need[1] = (*whole)?[1];
                            Some(need)
                        })
                        .collect()
                })
                .collect();
            tiles.push(Tile {
                at: strip.at,
                part: computed[chain.last],
                produced: computed.clone(),
                extra_parts: chain.extra.iter().map(|&k| computed[k]).collect(),
                computed,
                reads,
            });
        }
        let halo = (0..n)
            .map(|k| {
                let [h, w] = chain.grids[k];
                let computed = if recomputed[k] { recomputed_rows[k] } else { done[k] };
                computed * w - h * w
            })
            .collect();
        Some(Tiling {
            grid: [rows, 1],
            parts: Parts::Listed(tiles),
            extra_macs: 0,
            halo,
            streamed: true,
        })
    }
}

/// Cuts the chain's output into `grid` near-equal parts and derives every tile's regions;
/// `None` when the output has fewer rows or columns than the grid asks.
pub fn tile(graph: &Graph, chain: &Chain, grid: [usize; 2]) -> Option<Tiling> {
    tile_within(graph, chain, grid, u64::MAX)
}

/// [`tile`], also `None` when the tiles would recompute more than `max_macs`.
pub fn tile_within(
    graph: &Graph,
    chain: &Chain,
    grid: [usize; 2],
    max_macs: u64,
) -> Option<Tiling> {
    Strips::new(graph, chain).tile_costed(grid, max_macs)?.ok()
}

impl Strips<'_> {
    /// [`tile_within`], with `Err` and the extra MACs when the tiles would recompute more
    /// than `max_macs`. Rows and columns propagate independently (every rule maps rows to
    /// rows and columns to columns), so the regions of the grid's `rows + cols` strips give
    /// every tile's and the extra MACs before any tile is built.
    fn tile_costed(&self, grid: [usize; 2], max_macs: u64) -> Option<Result<Tiling, u64>> {
        let (graph, chain) = (self.graph, self.chain);
        let [h, w] = chain.grids[chain.last];
        if grid[0] as i64 > h || grid[1] as i64 > w || grid.contains(&0) {
            return None;
        }
        // A token-major tensor holds a band of whole rows as one range of tokens.
        if grid[1] > 1 && chain.bands_only() {
            return None;
        }
        let row_strips = self.along(0, grid[0])?;
        let col_strips = self.along(1, grid[1])?;
        let total = |strips: &[Tile], axis: usize, k: usize| -> i64 {
            strips.iter().map(|t| t.computed[k][axis].len()).sum()
        };
        let mut halo = vec![0; chain.nodes.len()];
        let mut extra_macs = 0u64;
        for (k, &id) in chain.nodes.iter().enumerate() {
            let [kh, kw] = chain.grids[k];
            halo[k] = total(&row_strips, 0, k) * total(&col_strips, 1, k) - kh * kw;
            let node = &graph.nodes[id];
            let per_position = macs_per_position(graph, node, chain.grids[k]);
            extra_macs = extra_macs.saturating_add(per_position * halo[k].max(0) as u64);
            if let (Rule::Upsample(_), Some(input)) = (&chain.rules[k], node.inputs[0]) {
                // A ConvTranspose's work follows the input positions each copy reads.
                let s = shape_of(graph, input).unwrap_or_default();
                let read = |strips: &[Tile], axis: usize| -> i64 {
                    strips
                        .iter()
                        .filter_map(|t| t.reads[k][0])
                        .map(|r| r[axis].len())
                        .sum()
                };
                let read = read(&row_strips, 0) * read(&col_strips, 1);
                let whole = s.get(2..4).map_or(0, |d| d[0] * d[1]);
                extra_macs = extra_macs.saturating_add(
                    input_macs_per_position(graph, node) * (read - whole).max(0) as u64,
                );
            }
        }
        if extra_macs > max_macs {
            return Some(Err(extra_macs));
        }
        Some(Ok(Tiling {
            grid,
            parts: Parts::Crossed {
                rows: row_strips,
                cols: col_strips,
            },
            extra_macs,
            halo,
            streamed: false,
        }))
    }
}

/// The tile at `at` from its row strip's rows and its column strip's columns.
fn cross(row: &Tile, col: &Tile, at: [usize; 2]) -> Tile {
    let pair = |r: Region, c: Region| [r[0], c[1]];
    let pairs = |r: &[Region], c: &[Region]| -> Vec<Region> {
        r.iter().zip(c).map(|(&r, &c)| pair(r, c)).collect()
    };
    Tile {
        at,
        part: pair(row.part, col.part),
        computed: pairs(&row.computed, &col.computed),
        produced: pairs(&row.produced, &col.produced),
        extra_parts: pairs(&row.extra_parts, &col.extra_parts),
        reads: row
            .reads
            .iter()
            .zip(&col.reads)
            .map(|(r, c)| {
                r.iter()
                    .zip(c)
                    .map(|(r, c)| Some(pair((*r)?, (*c)?)))
                    .collect()
            })
            .collect(),
    }
}

/// True when a node of the strip reads nothing but padding along `axis` (a strip within a
/// `Pad`'s border): its copies would read empty slices.
fn reads_only_padding(graph: &Graph, chain: &Chain, strip: &Tile, axis: usize) -> bool {
    (0..chain.nodes.len()).any(|k| {
        strip.reads[k].iter().enumerate().any(|(i, read)| {
            let (Some(r), Some(size)) = (read, chain.input_grid(graph, k, i)) else {
                return false;
            };
            r[axis].clip(size[axis]).is_empty()
        })
    })
}

/// The spans `parts` of an axis of length `from` cut at the same fractions of an axis of
/// length `to`; `None` when a part would be empty.
fn scaled(parts: &[Span], from: i64, to: i64) -> Option<Vec<Span>> {
    let at = |x: i64| x * to / from;
    let spans: Vec<Span> = parts
        .iter()
        .map(|p| Span::new(at(p.start), at(p.end)))
        .collect();
    spans.iter().all(|s| !s.is_empty()).then_some(spans)
}

/// The region of an input read as `read` that a node of rule `rule` reads to make `region` of
/// its output (unclipped: positions outside the input are padding); `None` for inputs read
/// whole or absent.
fn need(rule: &Rule, read: &Read, region: Region) -> Option<Region> {
    Some(match (read, rule) {
        (Read::Absent | Read::Whole, _) => return None,
        (_, Rule::Window(window)) => window.need(region),
        (_, Rule::Upsample(up)) => up.need(region),
        (_, Rule::Pointwise(_) | Rule::Rows) => region,
    })
}

/// The first row of chain node `j`'s output that `tile` reads (within the output), `None`
/// when no chain node reads it.
pub fn first_row_read(chain: &Chain, tile: TileRef, j: usize) -> Option<i64> {
    let [h, _] = chain.grids[j];
    chain.readers[j]
        .iter()
        .filter_map(|&(k, i)| tile.read(k, i).map(|need| need[0].clip(h).start))
        .min()
}

/// Walks the chain backwards from the tile's part of the output (and its parts of the other
/// outputs): each node computes the hull of what its readers in the chain need (and its own
/// part), clipped to its output.
fn propagate(chain: &Chain, at: [usize; 2], part: Region, extra: Vec<Region>) -> Option<Tile> {
    let n = chain.nodes.len();
    let mut computed: Vec<Option<Region>> = vec![None; n];
    computed[chain.last] = Some(part);
    for (&k, &p) in chain.extra.iter().zip(&extra) {
        computed[k] = Some(p);
    }
    let mut reads = vec![Vec::new(); n];
    let mut produced = vec![full(0, 0); n];
    for k in (0..n).rev() {
        let region = computed[k]?;
        produced[k] = region;
        reads[k] = chain.reads[k]
            .iter()
            .map(|read| {
                let need = need(&chain.rules[k], read, region)?;
                if let Read::Inside(j) = *read {
                    let [jh, jw] = chain.grids[j];
                    let clipped = [need[0].clip(jh), need[1].clip(jw)];
                    computed[j] = Some(computed[j].map_or(clipped, |c| hull(c, clipped)));
                }
                Some(need)
            })
            .collect();
        if let (Rule::Upsample(up), Some(Some(read))) = (&chain.rules[k], reads[k].first()) {
            produced[k] = up.produced(*read);
        }
    }
    Some(Tile {
        at,
        part,
        computed: computed.into_iter().collect::<Option<Vec<_>>>()?,
        produced,
        extra_parts: extra,
        reads,
    })
}
