"""The GitHub backend: blocked issues and their answers. `issues` (what a blocked issue is),
`api` (the REST client), `poll` (reading the repositories), `send` (posting an answer),
`backend` (the Source).

Layer: sources (a backend package: it imports no other backend).
"""
