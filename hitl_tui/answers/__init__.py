"""Answering a block: the answer service (`service`: plan, apply, journal, restart, report),
the write itself (`apply`), the repository's files written atomically and minimally
(`repofs`), and the per-repository lock (`locks`).

Layer: answers, beside agent and loops; above journal and inbox. `repofs` and `locks` are
also what the journal writes and rolls back with.
"""
