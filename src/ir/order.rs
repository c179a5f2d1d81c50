//! The inverse of an execution order: the step at which each node runs.

use super::NodeId;

/// The step of each of `nodes` node ids in `order` (`usize::MAX` for a node not in it).
pub fn steps_of(order: &[NodeId], nodes: usize) -> Vec<usize> {
    let mut step = vec![usize::MAX; nodes];
    for (s, &node) in order.iter().enumerate() {
        step[node] = s;
    }
    step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_invert_the_order() {
        // Nodes 0..5 run as 3, 0, 4, 1; node 2 does not run.
        assert_eq!(steps_of(&[3, 0, 4, 1], 5), vec![1, 3, usize::MAX, 0, 2]);
    }
}
