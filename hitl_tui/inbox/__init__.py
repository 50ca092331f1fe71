"""The inbox: the blocks of every repository in the workspace, found, parsed, cached and
kept up to date. `inbox` (the Inbox), `workers` (the process-pool scan's worker), `workspace`
(which repositories), `watch` (file-system events), `parsecache` (parses kept across runs),
`codec` (the cache's encoding of blocks), `view` and `query` (ordering and filtering),
`diagnostics` (why a repository shows nothing).

Layer: inbox, beside journal; above sources and state, below agent, loops, answers and the
clients.
"""
