"""The agenticloop format: blocked task files under the loop's folder. `layout` (where the
tasks are: project.md, the task folder), `frontmatter` (the task file's header reader), `parse`
(a task file to a Block), `writer` (an answer written into a task file) and `source` (the
Source the registry builds).

Layer: sources (a backend package: it imports no other backend).
"""
