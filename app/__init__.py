"""gpuproof: keeps Rust GPU projects honest."""

__version__ = "0.1.0"
