"""Answer from the phone: the Telegram bot (issue 28).

- `settings`: the `[telegram]` table, the token (from the environment only) and `scrub`;
- `api`: the Bot API client (long polling, bounded exchanges, 429 honoured within a bound);
- `poller`: the claim of the one poller per token, a lock in the state folder;
- `book`: `telegram.json` in the state folder: the buttons' short tokens and the messages sent;
- `text`: what a message says and its buttons (plain text, never markup);
- `bot`: the bot itself: blocks sent, taps and replies answered through the answer service,
  and `Runner`, its two threads (the app and `hitl listen` run it).
"""
