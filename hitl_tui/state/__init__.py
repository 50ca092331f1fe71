"""The operator's own state on disk: the state files' safe reading and writing (`files`), and
the books kept beside the journal: blocks seen (`seen`), snoozed (`snoozes`), and the mark
that `--since` counts from (`since`).

Layer: state, just above the leaf modules (model, fsio, paths...). It imports only them.
"""
