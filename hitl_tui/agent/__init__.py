"""The agent's side of hitl: writing a BLOCKED.md (`escalate`), the loop runner's gate
(`guard`: the blocks under a path, the agent's command run as a shell would), and the
channels that tell the human (`channels`: Telegram, Slack, a dial command).

Layer: agent, beside loops and answers; above journal and inbox, below the clients.
"""
