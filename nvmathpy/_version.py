"""The nvmathpy version, read by packaging and recorded in wisdom entries."""

__version__ = "0.1.0"
