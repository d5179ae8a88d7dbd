"""Token-bucket limits: on tool calls (:mod:`.calls`) and on failed authentications
(:mod:`.auth_failures`), in buckets every replica shares (:mod:`.shared`) or, when those do not
answer, the replica's own (:mod:`.local`)."""
