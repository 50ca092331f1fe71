"""hitl: the operator's inbox for blocked coding-agent loops."""

__version__ = "0.1.0"
