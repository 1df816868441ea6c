"""The Python profile."""
