"""Block sources: one package per file format or remote backend, each implementing
`base.Source`: `loopkit` (BLOCKED.md), `agenticloop` (task files), `github` (issues),
`ssh` (a far host's hitl). `agentic_common` is shared by two formats (not a backend);
`registry` is the one table that names the backends; `remote` types what a remote backend
is to the rest, and what it is handed (the inbox it pushes into, the journal it records in).

Layer: sources, above state and the leaf modules, below inbox and journal. The backend
packages never import each other. This face imports nothing, so that no module below it
imports its way back up through it.
"""
