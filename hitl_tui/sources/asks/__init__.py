"""hitl's own asks, filed by `hitl mcp`: `.hitl/asks/<id>.json` (see source.py)."""
