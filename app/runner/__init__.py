"""The GPU runner's side: run Rust test binaries on a GPU host under a CUPTI tracer
that counts the kernels each test process launched. Standard library only, so it
runs on a GPU host that has Python but none of gpuproof's other dependencies."""
