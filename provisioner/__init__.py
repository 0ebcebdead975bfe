"""fabnet: declarative, drift-aware network state for GPU training clusters."""

__version__ = "0.1.0"
