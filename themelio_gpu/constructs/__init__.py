"""Building blocks of each cluster's stack, one per module.

`GpuClusterStack` is the cdktf stack; the others are plain classes that add their resources straight to
it under readable ids (no nested Construct: see constructs/README.md and docs/performance.md).
"""
