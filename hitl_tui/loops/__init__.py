"""The agents' loops as hitl drives them: restarting a loop after an answer (`commands`: the
`[[loop]]` table and its commands), tracking whether a loop resumed (`resume`), similar
questions (`similarity`), and the operator's notices of new blocks and late answers
(`notices`).

Layer: loops, beside agent and answers; above journal and inbox, below the clients.
"""
