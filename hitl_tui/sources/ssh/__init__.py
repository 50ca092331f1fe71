"""The ssh backend: a far host's hitl, reached through `hitl serve` over ssh. `wire` (the
protocol's lines) and `backend` (config, transport, pending answers, session: to be split).

Layer: sources (a backend package: it imports no other backend).
"""
