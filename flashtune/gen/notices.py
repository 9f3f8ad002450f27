"""The warning category of run-time fallbacks (``flashtune.dispatch.DispatchWarning``); its
once-per-process notices go through ``flashtune.once.warn_once``.

Defined here, below both users: the kernel loader and the attention launcher (in this package)
warn with it, and ``flashtune.dispatch``, which imports this package, re-exports it.
"""


class DispatchWarning(RuntimeWarning):
    """The dispatcher worked around trouble (it fell back to a default config)."""
