"""Tutoring chat: the streamed reply (:mod:`.chat_reply`) and the conversation summary
(:mod:`.summarize_conversation`).

Both run on the conversation bundle the context service builds (completed history only, the
stored summary, structured state, a pseudonymous profile, retrieved knowledge). The reply is
streamed as plain text; the summary is JSON like every other prompt and is stored back through
the context service, which never calls a model itself.
"""
