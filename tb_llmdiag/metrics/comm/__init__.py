"""Communication: which device events are collectives (``collectives``), one rank's communication apart from its
compute (``communication``) and what each collective is for (``purpose``)."""
