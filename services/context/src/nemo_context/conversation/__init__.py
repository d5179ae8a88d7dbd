"""Conversation context: BuildConversationContext and RecordTurn.

- :mod:`.filtering` — which stored messages may be reused, and the recent window;
- :mod:`.budget` — the conservative token estimate and trimming;
- :mod:`.redaction` — masking internal keys typed into chat text;
- :mod:`.store` — reads and writes, bound to the session's learner;
- :mod:`.builder` — assembles and gates the bundle;
- :mod:`.record` — the write path for finished turns, state and summaries.
"""
