"""The loopkit format: BLOCKED.md at a repository's root. `source` (parse and write),
`render` (the answer as loopkit writes it back), `gitref` (the git refs a loop resumes from).

Layer: sources (a backend package: it imports no other backend).
"""
