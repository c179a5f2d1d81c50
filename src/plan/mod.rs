//! The planner core: dynamic storage allocation over intervals, independent of ONNX.
