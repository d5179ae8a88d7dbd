"""The audit log: one row per authenticated call, written in batches (:mod:`.log`), and read back
by operators a page at a time (:mod:`.query`)."""
