"""The agenticloop format: blocked task files under the loop's folder. `source` (layout,
parse, writer and the Source) and `frontmatter` (the task file's header reader).

Layer: sources (a backend package: it imports no other backend).
"""
