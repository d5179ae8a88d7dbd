"""An agent's rules: its grants and the enabled policies, loaded with its token (:mod:`.store`)
and kept in memory until the database announces a change (:mod:`.cache`)."""
