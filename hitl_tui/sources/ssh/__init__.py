"""The ssh backend: a far host's hitl, reached through `hitl serve` over ssh. `config` (the
`[[remote]]` table), `transport` (running the system ssh), `session` (the app's watch of one
host), `pending` (answers whose connection dropped), `backend` (`SshBackend`, the Source the
registry builds) and `wire` (the protocol's lines).

Layer: sources (a backend package: it imports no other backend).
"""
